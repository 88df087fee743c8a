"""Private hyperparameter search in scikit-learn's conventions (``dpml tune`` in Python).

:class:`DPSearchCV` draws a secret, random number of trials (Papernot & Steinke 2022: a
Poisson or truncated negative binomial number with mean ``trials_mean``), trains each trial
with DP-SGD on hyperparameters drawn at random from ``param_distributions``, scores it with a
noisy count of correct predictions on a keyed validation split of the training records, and
keeps the best. ``epsilon`` is the TOTAL: every trial's noise is calibrated so that the whole
search meets it (a search that cannot is refused before any training). The search runs in
dpml-core, the code ``dpml tune`` runs, with the recipe the estimators of :mod:`dpml.learn`
train with.

Fitted attributes mirror the command line's JSON: ``privacy_report_`` holds its fields
(``epsilon``, ``epsilon_per_trial``, ``epsilon_kept_run``, ``best``, ``tuning``, ...);
``best_estimator_`` is the kept model as a fitted estimator of the given kind; ``cv_results_``
lists every trial. By default the trials other than the kept one, their number and every exact
accuracy are NOT covered by ``epsilon`` (listing them would reveal the secret number of trials
and every trial's score): they come from ``privacy_report_["diagnostics"]`` (diagnostics, not
private releases), and so does ``cv_results_``. With ``release_trials=True`` (``dpml tune
--release-trials``) every trial's hyperparameters and noisy score are released under
``privacy_report_["trials"]``, covered by ``epsilon`` (composition over the random number of
trials: a larger epsilon at the same noise), and ``cv_results_`` lists those; the exact
accuracies stay diagnostics.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Union

import numpy as np

from . import _native
from ._args import whole
from ._args import seed as _seed
from .learn import (
    DPLogisticRegression,
    DPMLPClassifier,
    _class_names,
    _features,
    _opt,
    _Params,
    _required_ranges,
)
from .ledger import Ledger, native

__all__ = ["DPSearchCV", "tune", "SEARCHABLE"]


def __dir__() -> List[str]:
    return sorted(__all__)


#: The hyperparameters a search may vary (``momentum`` applies to SGD recipes only, and is
#: not a keyword of the estimators).
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
    space: Dict[str, Any] = {}
    for name, values in param_distributions.items():
        if isinstance(values, (np.ndarray, tuple)):
            space[name] = list(np.asarray(values).tolist())
        else:
            space[name] = values
    return json.dumps(space)


class DPSearchCV(_Params):
    """A private randomized search over an estimator's hyperparameters, as ``dpml tune``.

    Parameters
    ----------
    estimator : DPLogisticRegression or DPMLPClassifier
        The unfitted estimator every trial starts from: its declared ``bounds`` and
        ``classes``, its model shape and the values not searched.
    param_distributions : dict or str
        The space: names of :data:`SEARCHABLE` mapped to ``"LO..HI"`` (uniform), ``"LO..HI
        log"`` (log-uniform), a list of choices or ``{"range": [LO, HI], "log": True}``; or the
        text of ``dpml tune --search``.
    epsilon : float, optional
        The search's TOTAL epsilon: every trial's noise is calibrated so that the whole search
        meets it. Default: the estimator's ``epsilon`` (else the recipe's target).
    noise_multiplier : float, optional
        Every trial's sigma instead of a total epsilon (the search's epsilon is reported; give
        ``score_epsilon`` too).
    delta : float, optional
        Delta of the search's guarantee. Default: the estimator's (else the recipe's).
    trials : str, default "poisson"
        The law of the number of trials: ``"poisson"`` (zero trials is possible: then no model
        is kept) or ``"truncated-negative-binomial"`` (with ``eta``).
    trials_mean : float
        The mean number of trials, in [1, 1000] (required, as ``--trials-mean``).
    eta : float, optional
        Shape of the truncated negative binomial, > -1 (0: logarithmic, 1: geometric).
    validation_fraction : float, optional
        Share of the records held out (per record, keyed) to score the trials. Default
        ``dpml.learn.DEFAULTS["tune"]["validation_fraction"]``.
    score_epsilon : float, optional
        Epsilon of each trial's noisy validation count. Default: the total epsilon times
        ``DEFAULTS["tune"]["score_share"]``.
    release_trials : bool, default False
        Release every trial's hyperparameters and noisy score (``privacy_report_["trials"]``),
        and so their number, as ``dpml tune --release-trials``: the search is then accounted by
        composition over the random number of trials instead of Papernot & Steinke's best-only
        bound (a larger epsilon; with a total ``epsilon`` each trial gets more noise).
    random_state : int, optional
        Seed of the generator, for reproducible tests only.
    diagnostics : bool, default True
        Keep the trial list, the number of trials and the exact accuracies under
        ``privacy_report_["diagnostics"]`` (and so ``cv_results_``); ``False`` leaves them out.
    ledger : Ledger, optional
        A budget ledger charged with the search, as ``dpml tune --ledger``: one entry (the
        whole search), checked before any trial trains and recorded before ``fit`` returns.

    Attributes
    ----------
    best_estimator_ : DPLogisticRegression or DPMLPClassifier or None
        The kept model as a fitted estimator (``None`` when the law drew no trial); its
        ``privacy_report_`` is the search's release.
    best_params_ : dict or None
        The kept trial's hyperparameters.
    best_score_ : float or None
        Its noisy validation score (covered by epsilon).
    cv_results_ : dict
        Every trial in scikit-learn's layout (``params``, ``param_<name>``, ``noisy_score``,
        ``rank_noisy_score``, ``noise_multiplier``, and with diagnostics
        ``validation_accuracy`` and ``fit_time``). By default from the diagnostics (not
        covered by epsilon; empty with ``diagnostics=False``); with ``release_trials=True``
        from the released trials (covered by epsilon, present with ``diagnostics=False`` too).
    epsilon_, delta_ : float
        The guarantee of the whole search.
    privacy_report_ : dict
        ``dpml tune``'s JSON fields.
    """

    def __init__(
        self,
        estimator: Any = None,
        param_distributions: Union[str, SpaceLike, None] = None,
        epsilon: Optional[float] = None,
        noise_multiplier: Optional[float] = None,
        delta: Optional[float] = None,
        trials: str = "poisson",
        trials_mean: Optional[float] = None,
        eta: Optional[float] = None,
        validation_fraction: Optional[float] = None,
        score_epsilon: Optional[float] = None,
        release_trials: bool = False,
        random_state: Optional[int] = None,
        diagnostics: bool = True,
        ledger: Optional[Ledger] = None,
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
        self.release_trials = release_trials
        self.random_state = random_state
        self.diagnostics = diagnostics
        self.ledger = ledger

    def _repetitions(self) -> str:
        law = self.trials.replace("-", "_")
        if law not in ("poisson", "truncated_negative_binomial"):
            raise ValueError(
                f"unknown trials law {self.trials!r}; known: poisson, truncated-negative-binomial"
            )
        if law == "poisson" and self.eta is not None:
            raise ValueError("eta applies to trials='truncated-negative-binomial', not poisson")
        if law != "poisson" and self.eta is None:
            raise ValueError(
                "trials='truncated-negative-binomial' needs eta (0: logarithmic, 1: geometric)"
            )
        if self.trials_mean is None:
            raise ValueError("trials_mean is required: the mean number of trials")
        repetitions: Dict[str, Any] = {"law": law, "mean": float(self.trials_mean)}
        if self.eta is not None:
            repetitions["eta"] = float(self.eta)
        return json.dumps(repetitions)

    def fit(self, X: Any, y: Any) -> "DPSearchCV":
        """Searches on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The private records.
        y : array-like of shape (n_samples,)
            Their labels, each one of the estimator's ``classes``.

        Returns
        -------
        self
            The fitted search.

        Raises
        ------
        ValueError
            For a bad space or law, undeclared bounds or classes, a target epsilon the search
            cannot meet or a ledger it would overspend (all before any training).
        """
        base = self.estimator if self.estimator is not None else DPLogisticRegression()
        if not isinstance(base, (DPLogisticRegression, DPMLPClassifier)):
            raise ValueError(
                "estimator must be a DPLogisticRegression or DPMLPClassifier, got "
                f"{type(base).__name__}"
            )
        if self.param_distributions is None:
            raise ValueError("param_distributions is required: the space to search")
        x = _features(X)
        classes, labels = base._class_indices(x, y)
        recipe = base._recipe()
        if self.epsilon is not None or self.noise_multiplier is not None:
            recipe["epsilon"] = _opt(float, self.epsilon)
            recipe["noise_multiplier"] = _opt(float, self.noise_multiplier)
        if self.delta is not None:
            recipe["delta"] = float(self.delta)
        model, release, log = base._call(
            _native.tune_fit,
            x,
            labels,
            _class_names(classes),
            _required_ranges(base.bounds, x.shape[1]),
            recipe,
            _space_json(self.param_distributions),
            self._repetitions(),
            validation_fraction=_opt(float, self.validation_fraction),
            score_epsilon=_opt(float, self.score_epsilon),
            release_trials=bool(self.release_trials),
            seed=_seed(self.random_state, "random_state"),
            ledger=native(self.ledger),
        )
        self._report(release)
        self.epsilon_ = self.privacy_report_["epsilon"]
        self.delta_ = self.privacy_report_["delta"]
        self.cv_results_ = _cv_results(self.privacy_report_)
        best = self.privacy_report_.get("best")
        if model is None or best is None:
            # The law drew no trial (Poisson's K = 0): nothing was trained.
            self.best_estimator_ = None
            self.best_params_ = None
            self.best_score_ = None
            return self
        self.best_params_ = {
            k: _value(k, best[k]) for k in SEARCHABLE if k in best and k != "momentum"
        }
        self.best_score_ = best["noisy_score"]
        kept = type(base)(**dict(base.get_params(), diagnostics=self.diagnostics))
        kept.set_params(**self.best_params_)
        kept._fitted((model, release, log), classes, x)
        self.best_estimator_ = kept
        return self

    def _kept(self) -> Any:
        if getattr(self, "best_estimator_", None) is None:
            raise ValueError(
                "no fitted model: call fit first (a search that drew no trial keeps none)"
            )
        return self.best_estimator_

    def predict(self, X: Any) -> np.ndarray:
        """The kept model's predictions (post-processing: no privacy cost).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records to classify.

        Returns
        -------
        ndarray of shape (n_samples,)
            Values of the declared classes.
        """
        return self._kept().predict(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        """The kept model's class probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records to classify.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Each row sums to 1.
        """
        return self._kept().predict_proba(X)

    def score(self, X: Any, y: Any) -> float:
        """The kept model's accuracy on ``(X, y)`` (a diagnostic when they are private).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records.
        y : array-like of shape (n_samples,)
            Their true classes.

        Returns
        -------
        float
            The share of rows predicted right.
        """
        return float(self._kept().score(X, y))


def _value(name: str, v: Any) -> Any:
    return whole(v, "batch_size") if name == "batch_size" else float(v)


def _cv_results(report: Dict[str, Any]) -> Dict[str, Any]:
    """Every trial in scikit-learn's layout (``params``, ``param_<name>``, scores, ranks): the
    released trials when the search released them (``report["trials"]``), else the
    diagnostics' list (empty when they were left out). The exact accuracies and times come
    from the diagnostics only."""
    diagnostic = report.get("diagnostics", {}).get("trials", [])
    trials = report.get("trials", diagnostic)
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
    results["noise_multiplier"] = np.array(
        [t["noise_multiplier"] for t in trials], dtype=np.float64
    )
    if len(diagnostic) == len(trials):
        results["validation_accuracy"] = np.array(
            [t["validation_accuracy"] for t in diagnostic], dtype=np.float64
        )
        results["fit_time"] = np.array(
            [t["wall_seconds"] for t in diagnostic], dtype=np.float64
        )
    return results


def tune(
    X: Any, y: Any, estimator: Any, param_distributions: Union[str, SpaceLike], **kwargs: Any
) -> DPSearchCV:
    """Runs a private search: ``DPSearchCV(estimator, param_distributions, **kwargs).fit(X, y)``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The private records.
    y : array-like of shape (n_samples,)
        Their labels.
    estimator : DPLogisticRegression or DPMLPClassifier
        The estimator every trial starts from.
    param_distributions : dict or str
        The space (see :class:`DPSearchCV`).
    **kwargs
        The other keywords of :class:`DPSearchCV` (``epsilon``, ``trials_mean``, ...).

    Returns
    -------
    DPSearchCV
        The fitted search.
    """
    return DPSearchCV(estimator, param_distributions, **kwargs).fit(X, y)
