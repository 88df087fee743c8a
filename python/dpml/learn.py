"""Private estimators in scikit-learn's conventions.

``fit`` returns ``self``; ``get_params``/``set_params`` follow the ``__init__`` signature (so
``sklearn.base.clone``, pipelines and ``GridSearchCV`` work without importing scikit-learn
here); fitted attributes end with an underscore. Every fitted estimator has ``epsilon_``,
``delta_`` and ``privacy_report_``: the JSON fields of the command line (``dpml train``,
``dpml label-dp``, ``dpml kmeans``), released values at top level and figures computed from
the private data without noise under ``privacy_report_["diagnostics"]``.

The recipes and their defaults are those of the command line: a keyword left at ``None``
takes the value ``dpml`` itself would use (for example ``dpml train`` on a ``csv:`` table),
from the same Rust code. Bounds on the features and the class list are declared, never read
from the data. With ``ledger=`` (a :class:`dpml.Ledger`) every fit is charged as the command
line's ``--ledger`` charges a run: refused before training when it would overspend, recorded
before ``fit`` returns (its balance under ``privacy_report_["ledger"]``); a fit that fails
charges nothing. Fitted estimators pickle, and :meth:`DPMLPClassifier.save_model` writes the
model file of ``dpml train --save-model`` (read back by :func:`load_model` and ``dpml
inspect``).
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union

import numpy as np

from . import _native
from ._args import count, real, whole
from ._args import seed as _seed
from .ledger import Ledger, native, record

__all__ = [
    "DPLogisticRegression",
    "DPMLPClassifier",
    "DPKMeans",
    "LabelDPClassifier",
    "load_model",
    "DEFAULTS",
]


def __dir__() -> List[str]:
    return sorted(__all__)

#: The defaults of every front, from dpml's Rust core: ``"table"`` (the recipe of ``dpml
#: train`` on a table), ``"label_dp"``, ``"kmeans"``, ``"calibration_accountant"`` and
#: ``"top_k_rule"``. A keyword left at ``None`` takes its value from here.
DEFAULTS: Dict[str, Any] = json.loads(_native.defaults())

BoundsLike = Union[Tuple[Any, Any], Sequence[Tuple[float, float]], np.ndarray]

try:  # scikit-learn is optional; with it, its tags and mixins make clone and model selection work.
    from sklearn.base import BaseEstimator as _Base
    from sklearn.base import ClassifierMixin as _ClassifierMixin
    from sklearn.base import ClusterMixin as _ClusterMixin
except ImportError:  # pragma: no cover - exercised where scikit-learn is not installed

    class _Base:  # type: ignore[no-redef]
        pass

    class _ClassifierMixin:  # type: ignore[no-redef]
        pass

    class _ClusterMixin:  # type: ignore[no-redef]
        pass


_E = TypeVar("_E", bound="_Params")


def _keyword_errors(renames: Dict[str, str]) -> Callable[[ValueError], ValueError]:
    """A rewriter of the core's messages naming this estimator's keywords (``iterations`` is
    ``max_iter`` here)."""

    def rewrite(e: ValueError) -> ValueError:
        msg = str(e)
        for core, mine in renames.items():
            msg = re.sub(rf"\b{re.escape(core)}\b", mine, msg)
        return ValueError(msg)

    return rewrite


class _Params(_Base):
    """get_params/set_params from the ``__init__`` signature, as scikit-learn's BaseEstimator;
    pickling that keeps a fitted model as the bytes of its model file."""

    #: Core names of this estimator's keywords that differ (core name -> keyword).
    _renames: Dict[str, str] = {}

    @classmethod
    def _param_names(cls) -> List[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> Dict[str, Any]:
        """The constructor's parameters.

        Parameters
        ----------
        deep : bool, default True
            Accepted for scikit-learn; these estimators hold no sub-estimators.

        Returns
        -------
        dict
            Each ``__init__`` keyword and its value.
        """
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self: _E, **params: Any) -> _E:
        """Sets constructor parameters.

        Parameters
        ----------
        **params
            Keywords of ``__init__`` and their new values.

        Returns
        -------
        self
            The estimator.

        Raises
        ------
        ValueError
            For a keyword ``__init__`` does not take.
        """
        valid = self._param_names()
        for k, v in params.items():
            if k not in valid:
                raise ValueError(f"invalid parameter {k!r} for {type(self).__name__}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        model = state.get("model_")
        if model is not None:
            # The model file's bytes: safetensors with the architecture and privacy facts.
            state["model_"] = bytes(model.to_bytes())
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        model = state.get("model_")
        if isinstance(model, (bytes, bytearray)):
            state = dict(state, model_=_native.TrainedModel.from_bytes(bytes(model)))
        self.__dict__.update(state)

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Calls the core with this estimator's keyword names in its error messages."""
        try:
            return fn(*args, **kwargs)
        except ValueError as e:
            raise _keyword_errors(self._renames)(e) from None

    def _report(self, release: str, diagnostics: Optional[Dict[str, Any]] = None) -> None:
        """Keeps the release as ``privacy_report_``: its diagnostics (figures computed from the
        private data without noise) only when ``self.diagnostics`` is true."""
        report = json.loads(release)
        found = report.pop("diagnostics", {})
        found.update(diagnostics or {})
        if getattr(self, "diagnostics", True) and found:
            report["diagnostics"] = found
        # The core charged the ledger (if any) before the release came back: its balance.
        if "ledger" in report:
            report["ledger"] = record(report["ledger"])
        self.privacy_report_ = report


def _features(X: Any, name: str = "X") -> np.ndarray:
    x = np.ascontiguousarray(real(X, name), dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(
            f"{name} must be two-dimensional [n_samples, n_features], got shape {x.shape}"
        )
    return x


def _is_scalar(v: Any) -> bool:
    return np.ndim(v) == 0


def _ranges(bounds: Optional[BoundsLike], d: int) -> Optional[List[Tuple[float, float]]]:
    """Per-feature ``(low, high)`` pairs from the forms ``bounds`` takes: one ``(low, high)``
    pair for every feature, a list of ``d`` pairs, or diffprivlib's tuple ``(lower, upper)``
    of two arrays (or an array and a number) of length ``d``."""
    if bounds is None:
        return None
    if (
        isinstance(bounds, tuple)
        and len(bounds) == 2
        and not (_is_scalar(bounds[0]) and _is_scalar(bounds[1]))
    ):
        lower = np.broadcast_to(np.asarray(bounds[0], dtype=np.float64), (d,))
        upper = np.broadcast_to(np.asarray(bounds[1], dtype=np.float64), (d,))
        return [(float(lo), float(hi)) for lo, hi in zip(lower, upper)]
    b = np.asarray(bounds, dtype=np.float64)
    if b.shape == (2,):
        return [(float(b[0]), float(b[1]))] * d
    if b.shape == (d, 2):
        return [(float(lo), float(hi)) for lo, hi in b]
    raise ValueError(
        f"bounds must be one (low, high) pair, {d} pairs (one per feature) or a tuple "
        f"(lower, upper) of two arrays of {d} values; got shape {b.shape}"
    )


def _required_ranges(bounds: Optional[BoundsLike], d: int) -> List[Tuple[float, float]]:
    ranges = _ranges(bounds, d)
    if ranges is None:
        raise ValueError(
            "bounds are required: declare (low, high) for every feature or one pair per "
            "feature; they must not come from the data"
        )
    return ranges


def _class_names(classes: np.ndarray) -> List[str]:
    return [str(c) for c in classes.tolist()]


class _NetworkClassifier(_ClassifierMixin, _Params):
    """What every network classifier shares: declared classes, and prediction from the fitted
    ``model_`` (post-processing of a private model: no privacy cost)."""

    _renames = {"hidden": "hidden_layer_sizes"}

    def _class_indices(self, x: np.ndarray, y: Any) -> Tuple[np.ndarray, np.ndarray]:
        yy = np.asarray(y)
        if yy.shape != (x.shape[0],):
            raise ValueError(f"y must have one label per row of X ({x.shape[0]}), got {yy.shape}")
        # The label set is a declared domain, like the bounds: read off the labels it would
        # reveal which classes the private records contain.
        if self.classes is None:
            raise ValueError(
                "classes are required: declare the label set (classes=[...]); it is never read "
                "from the private labels"
            )
        classes = np.asarray(self.classes)
        index = {c: i for i, c in enumerate(classes.tolist())}
        try:
            labels = np.array([index[v] for v in yy.tolist()], dtype=np.int64)
        except KeyError as e:
            raise ValueError(f"label {e.args[0]!r} is not one of the declared classes") from None
        return classes, labels

    def _fitted(self, fitted: Tuple[Any, str, str], classes: np.ndarray, x: np.ndarray) -> None:
        model, release, log = fitted
        self.model_ = model
        self.classes_ = classes
        self.n_features_in_ = x.shape[1]
        epochs = json.loads(log)
        self._report(release, {"epoch_log": epochs} if epochs else None)
        self.epsilon_ = self.privacy_report_.get("epsilon")
        self.delta_ = self.privacy_report_.get("delta")

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise ValueError(f"this {type(self).__name__} is not fitted: call fit first")

    def decision_function(self, X: Any) -> np.ndarray:
        """The network's logits (post-processing: no privacy cost).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records to score.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            One logit per class, in the order of ``classes_``.
        """
        self._check_fitted()
        x = _features(X)
        if x.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {x.shape[1]} features, the model was fitted on {self.n_features_in_}"
            )
        return np.asarray(self.model_.predict_logits(x), dtype=np.float64)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (the softmax of the logits).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records to classify.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Each row sums to 1.
        """
        z = self.decision_function(X)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        """The most likely class of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records to classify.

        Returns
        -------
        ndarray of shape (n_samples,)
            Values of ``classes_``.
        """
        logits = self.decision_function(X)
        return self.classes_[np.argmax(logits, axis=1)]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records.
        y : array-like of shape (n_samples,)
            Their true classes.
        sample_weight : array-like of shape (n_samples,), optional
            Weights of the records.

        Returns
        -------
        float
            The (weighted) share of rows predicted right. Computed from the records given:
            a diagnostic when they are private.
        """
        right = self.predict(X) == np.asarray(y)
        return float(np.average(right, weights=sample_weight))

    def save_model(self, path: Any) -> None:
        """Writes the fitted model to a file, as ``dpml train --save-model`` does.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write: safetensors with the architecture, the input transform and the
            privacy facts (read by :func:`load_model`, ``dpml inspect``, ``dpml eval`` and
            ``dpml predict``).
        """
        self._check_fitted()
        self.model_.save(str(path))


class _DPSGDClassifier(_NetworkClassifier):
    _model = ""

    def _recipe(self) -> Dict[str, Any]:
        """This estimator's DP-SGD recipe as the core takes it (``None``: the table recipe's
        value), shared by ``fit`` and :class:`dpml.tuning.DPSearchCV`."""
        return {
            "model": self._model,
            "hidden": None,
            "arch_json": None,
            "epsilon": _opt(float, self.epsilon),
            "noise_multiplier": _opt(float, self.noise_multiplier),
            "delta": _opt(float, self.delta),
            "max_grad_norm": _opt(float, self.max_grad_norm),
            "epochs": _opt(float, self.epochs),
            "batch_size": _opt(lambda v: count(v, "batch_size"), self.batch_size),
            "learning_rate": _opt(float, self.learning_rate),
        }

    def _fit(self, X: Any, y: Any) -> "_DPSGDClassifier":
        x = _features(X)
        classes, labels = self._class_indices(x, y)
        fitted = self._call(
            _native.dpsgd_fit,
            x,
            labels,
            _class_names(classes),
            _required_ranges(self.bounds, x.shape[1]),
            self._recipe(),
            seed=_seed(self.random_state, "random_state"),
            ledger=native(self.ledger),
        )
        self._fitted(fitted, classes, x)
        return self


def _opt(kind: Callable[[Any], Any], v: Any) -> Any:
    return None if v is None else kind(v)


_T = DEFAULTS["table"]

_DPSGD_PARAMETERS = f"""
    epsilon : float, optional
        Target epsilon: the noise is calibrated so that the final epsilon at ``delta`` does
        not exceed it (accountant ``{_T["accountant"]}``). Default: the recipe's target,
        {_T["epsilon"]}, unless ``noise_multiplier`` is given.
    noise_multiplier : float, optional
        The noise multiplier sigma instead of a target epsilon (epsilon is then reported).
    delta : float, optional
        Delta of the (epsilon, delta) guarantee. Default {_T["delta"]}.
    max_grad_norm : float, optional
        Clipping norm C of each per-sample gradient. Default {_T["max_grad_norm"]}.
    epochs : float, optional
        Epochs E (the run has ceil(E*N/B) steps). Default {_T["epochs"]}.
    batch_size : int, optional
        Expected (Poisson) batch size B. Default {_T["batch_size"]}, or a quarter of the
        records when there are fewer (said in ``privacy_report_["notes"]``).
    learning_rate : float, optional
        Learning rate. Default {_T["learning_rate"]}.
"""

_COMMON_PARAMETERS = """
    bounds : tuple or array-like
        Declared feature bounds (public; never read from the data): one ``(low, high)``
        pair for every feature, a list of ``(low, high)`` pairs (one per feature), or a
        tuple ``(lower, upper)`` of two arrays as diffprivlib takes it. Features are clamped
        to them and scaled from them.
    classes : sequence
        The declared label set (public), in the order of the model's outputs.
    random_state : int, optional
        Seed of the generator, for reproducible tests only (a seeded run is not a secure
        release); by default the operating system's.
    diagnostics : bool, default True
        Keep the figures computed from the private data without noise (accuracies, losses)
        under ``privacy_report_["diagnostics"]``; ``False`` leaves them out, as ``dpml
        --no-diagnostics``.
    ledger : Ledger, optional
        A budget ledger charged with each fit, as ``dpml train --ledger``: a fit that would
        overspend is refused before it trains; the spend is recorded before ``fit`` returns.
"""

_CLASSIFIER_ATTRIBUTES = """
    Attributes
    ----------
    model_ : dpml._native.TrainedModel
        The trained network (see :meth:`save_model`).
    classes_ : ndarray
        The declared classes.
    n_features_in_ : int
        Features seen in ``fit``.
    epsilon_ : float
        Epsilon of the guarantee.
    delta_ : float
        Its delta.
    privacy_report_ : dict
        The release, with the command line's field names; ``"diagnostics"`` holds figures
        computed from the private data without noise (not differentially private).
"""


class DPMLPClassifier(_DPSGDClassifier):
    __doc__ = f"""A multilayer perceptron trained with DP-SGD, as ``dpml train`` on a table.

    Poisson sampling, per-example clipping to ``max_grad_norm`` and exact discrete Gaussian
    noise; the guarantee is (epsilon, delta)-DP for adding or removing one record. A keyword
    left at ``None`` takes the table recipe's value (``dpml.learn.DEFAULTS["table"]``).

    Parameters
    ----------{_DPSGD_PARAMETERS}
    hidden_layer_sizes : sequence of int, optional
        Hidden layer widths. Default {tuple(_T["hidden"])}.
    arch : dict, optional
        A network in the JSON form of ``dpml train --arch`` (``input_shape`` ``[n_features]``,
        the last layer giving one score per class), trained instead of the hidden layers. One
        without ``"name"`` is called ``"arch"``.{_COMMON_PARAMETERS}
{_CLASSIFIER_ATTRIBUTES}
    Examples
    --------
    >>> import numpy as np
    >>> from dpml.learn import DPMLPClassifier
    >>> X = np.random.default_rng(0).normal(size=(400, 3)); y = (X[:, 0] > 0).astype(int)
    >>> clf = DPMLPClassifier(epsilon=2.0, bounds=(-4, 4), classes=[0, 1], epochs=5)
    >>> clf.fit(X, y).epsilon_ <= 2.0
    True
    """

    _model = "mlp"

    def __init__(
        self,
        epsilon: Optional[float] = None,
        noise_multiplier: Optional[float] = None,
        delta: Optional[float] = None,
        max_grad_norm: Optional[float] = None,
        epochs: Optional[float] = None,
        batch_size: Optional[int] = None,
        learning_rate: Optional[float] = None,
        hidden_layer_sizes: Optional[Sequence[int]] = None,
        bounds: Optional[BoundsLike] = None,
        classes: Optional[Sequence[Any]] = None,
        random_state: Optional[int] = None,
        arch: Optional[Dict[str, Any]] = None,
        diagnostics: bool = True,
        ledger: Optional[Ledger] = None,
    ) -> None:
        self.epsilon = epsilon
        self.noise_multiplier = noise_multiplier
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.hidden_layer_sizes = hidden_layer_sizes
        self.bounds = bounds
        self.classes = classes
        self.random_state = random_state
        self.arch = arch
        self.diagnostics = diagnostics
        self.ledger = ledger

    def fit(self, X: Any, y: Any) -> "DPMLPClassifier":
        """Trains on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The private records.
        y : array-like of shape (n_samples,)
            Their labels, each one of ``classes``.

        Returns
        -------
        self
            The fitted estimator.

        Raises
        ------
        ValueError
            For undeclared bounds or classes, a label outside the classes, or a recipe the
            training refuses (named by its keyword).
        """
        self._fit(X, y)
        return self

    def _recipe(self) -> Dict[str, Any]:
        sizes = self.hidden_layer_sizes
        return dict(
            super()._recipe(),
            hidden=None if sizes is None else [count(h, "hidden_layer_sizes") for h in sizes],
            arch_json=None if self.arch is None else json.dumps(self.arch),
        )


class DPLogisticRegression(_DPSGDClassifier):
    __doc__ = f"""Logistic regression trained with DP-SGD (``dpml train --model logreg``).

    The table recipe of :class:`DPMLPClassifier` with a linear model: (epsilon, delta)-DP for
    adding or removing one record.

    Parameters
    ----------{_DPSGD_PARAMETERS}{_COMMON_PARAMETERS}
{_CLASSIFIER_ATTRIBUTES}
    Examples
    --------
    >>> import numpy as np
    >>> from dpml.learn import DPLogisticRegression
    >>> X = np.random.default_rng(0).normal(size=(400, 3)); y = (X[:, 0] > 0).astype(int)
    >>> DPLogisticRegression(epsilon=1.0, bounds=(-4, 4), classes=[0, 1]).fit(X, y).epsilon_ <= 1.0
    True
    """

    _model = "logreg"

    def __init__(
        self,
        epsilon: Optional[float] = None,
        noise_multiplier: Optional[float] = None,
        delta: Optional[float] = None,
        max_grad_norm: Optional[float] = None,
        epochs: Optional[float] = None,
        batch_size: Optional[int] = None,
        learning_rate: Optional[float] = None,
        bounds: Optional[BoundsLike] = None,
        classes: Optional[Sequence[Any]] = None,
        random_state: Optional[int] = None,
        diagnostics: bool = True,
        ledger: Optional[Ledger] = None,
    ) -> None:
        self.epsilon = epsilon
        self.noise_multiplier = noise_multiplier
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.bounds = bounds
        self.classes = classes
        self.random_state = random_state
        self.diagnostics = diagnostics
        self.ledger = ledger

    def fit(self, X: Any, y: Any) -> "DPLogisticRegression":
        """Trains on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The private records.
        y : array-like of shape (n_samples,)
            Their labels, each one of ``classes``.

        Returns
        -------
        self
            The fitted estimator.
        """
        self._fit(X, y)
        return self


_L = DEFAULTS["label_dp"]


class LabelDPClassifier(_NetworkClassifier):
    __doc__ = f"""Label differential privacy, as ``dpml label-dp``.

    Each training label is privatised once (epsilon-label-DP per record) and a network is
    trained on the privatised labels without gradient noise. Only the labels are protected:
    the features are treated as public.

    Parameters
    ----------
    epsilon : float, optional
        Epsilon of each label. Default {_L["epsilon"]}.
    mechanism : str, optional
        ``"rr-prior"`` (RR-with-prior over ``stages`` stages, Ghazi et al. 2021), ``"rr"``
        (k-ary randomized response) or ``"laplace"`` (Laplace noise on the one-hot label).
        Default ``"{_L["mechanism"]}"``.
    stages : int, optional
        RR-with-prior's stages (default 2).
    top_k_rule : str, optional
        RR-with-prior's choice of each label's candidate classes: ``"information"`` or
        ``"expected-accuracy"``. Default ``"{DEFAULTS["top_k_rule"]}"``.
    hidden_layer_sizes : sequence of int, optional
        Hidden layer widths (default 512).
    epochs : float, optional
        Epochs of each stage (default: 3, or enough for 1,000 steps on small data sets).
    batch_size : int, optional
        Mini-batch size (default 128, at most the records of RR-with-prior's first stage).
    learning_rate : float, optional
        Adam's learning rate (default 0.0003).
    bounds : tuple or array-like, optional
        Declared feature bounds to scale the features from (the features are public, so none
        are required). Forms as :class:`DPMLPClassifier`'s.
    classes : sequence
        The declared label set (public).
    random_state : int, optional
        Seed of the generator, for reproducible tests only.
    diagnostics : bool, default True
        Keep the noisy labels' agreement with the true ones (computed without noise) under
        ``privacy_report_["diagnostics"]``.
    ledger : Ledger, optional
        A budget ledger charged with each fit, as ``dpml label-dp --ledger``: epsilon is
        checked before any label is privatised and recorded before ``fit`` returns.
{_CLASSIFIER_ATTRIBUTES}
    Examples
    --------
    >>> import numpy as np
    >>> from dpml.learn import LabelDPClassifier
    >>> X = np.random.default_rng(0).normal(size=(400, 3)); y = (X[:, 0] > 0).astype(int)
    >>> LabelDPClassifier(epsilon=2.0, classes=[0, 1], epochs=5).fit(X, y).epsilon_
    2.0
    """

    def __init__(
        self,
        epsilon: Optional[float] = None,
        mechanism: Optional[str] = None,
        stages: Optional[int] = None,
        top_k_rule: Optional[str] = None,
        hidden_layer_sizes: Optional[Sequence[int]] = None,
        epochs: Optional[float] = None,
        batch_size: Optional[int] = None,
        learning_rate: Optional[float] = None,
        bounds: Optional[BoundsLike] = None,
        classes: Optional[Sequence[Any]] = None,
        random_state: Optional[int] = None,
        diagnostics: bool = True,
        ledger: Optional[Ledger] = None,
    ) -> None:
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.stages = stages
        self.top_k_rule = top_k_rule
        self.hidden_layer_sizes = hidden_layer_sizes
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.bounds = bounds
        self.classes = classes
        self.random_state = random_state
        self.diagnostics = diagnostics
        self.ledger = ledger

    def fit(self, X: Any, y: Any) -> "LabelDPClassifier":
        """Privatises the labels of ``y`` and trains on ``(X, noisy labels)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The records' features (public under label DP).
        y : array-like of shape (n_samples,)
            Their private labels, each one of ``classes``.

        Returns
        -------
        self
            The fitted estimator.
        """
        x = _features(X)
        classes, labels = self._class_indices(x, y)
        hidden = self.hidden_layer_sizes
        fitted = self._call(
            _native.label_dp_fit,
            x,
            labels,
            _class_names(classes),
            _ranges(self.bounds, x.shape[1]),
            mechanism=_opt(str, self.mechanism),
            epsilon=_opt(float, self.epsilon),
            stages=_opt(lambda v: whole(v, "stages"), self.stages),
            top_k_rule=_opt(str, self.top_k_rule),
            hidden=None if hidden is None else [count(h, "hidden_layer_sizes") for h in hidden],
            epochs=_opt(float, self.epochs),
            batch_size=_opt(lambda v: count(v, "batch_size"), self.batch_size),
            learning_rate=_opt(float, self.learning_rate),
            seed=_seed(self.random_state, "random_state"),
            ledger=native(self.ledger),
        )
        self._fitted(fitted, classes, x)
        return self


_K = DEFAULTS["kmeans"]


class DPKMeans(_ClusterMixin, _Params):
    __doc__ = f"""k-means clustering, as ``dpml kmeans``: DP-Lloyd by default.

    DP-Lloyd adds noise to each iteration's counts and sums inside the declared ``bounds``
    (epsilon-DP for adding or removing one record); ``algorithm="lloyd"`` is plain,
    non-private k-means.

    Parameters
    ----------
    n_clusters : int, default {_K["n_clusters"]}
        Number of clusters k.
    epsilon : float, optional
        Total epsilon (per record for ``"input-perturbation"``); required by every private
        algorithm.
    algorithm : str, optional
        ``"dplloyd"`` (Laplace), ``"dplloyd-gaussian"`` (zCDP, with ``delta``),
        ``"input-perturbation"`` (local DP on each record) or ``"lloyd"`` (non-private).
        Default ``"{_K["algorithm"]}"``.
    delta : float, optional
        Delta of ``"dplloyd-gaussian"``.
    bounds : tuple or array-like
        Declared feature bounds (the clamping box; never read from the data). Forms as
        :class:`DPMLPClassifier`'s.
    max_iter : int, optional
        Lloyd iterations (default: chosen for the algorithm and budget; at most 10000).
    random_state : int, optional
        Seed of the generator, for reproducible tests only.
    diagnostics : bool, default True
        Keep the clustering quality on the private records (``inertia``, ``nicv``: computed
        without noise) under ``privacy_report_["diagnostics"]`` and as ``inertia_``.
    ledger : Ledger, optional
        A budget ledger charged with each fit, as ``dpml kmeans --ledger``: epsilon is checked
        before the first iteration and recorded before ``fit`` returns (plain ``"lloyd"`` is
        refused: its epsilon is unbounded).

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        The released centroids.
    labels_ : ndarray of shape (n_samples,)
        Each training record's nearest centroid (post-processing, on your own records).
    inertia_ : float or None
        Sum of squared distances of the (clamped) training records to their centroids: a
        diagnostic computed without noise; ``None`` with ``diagnostics=False``.
    n_iter_ : int
        Lloyd iterations run.
    n_features_in_ : int
        Features seen in ``fit``.
    epsilon_, delta_ : float or None
        The guarantee (``None`` for plain Lloyd).
    privacy_report_ : dict
        The release, with the command line's field names.

    Examples
    --------
    >>> import numpy as np
    >>> from dpml.learn import DPKMeans
    >>> X = np.random.default_rng(0).normal(size=(2000, 2))
    >>> km = DPKMeans(n_clusters=2, epsilon=1.0, bounds=(-4, 4)).fit(X)
    >>> km.cluster_centers_.shape
    (2, 2)
    """

    _renames = {"iterations": "max_iter"}

    def __init__(
        self,
        n_clusters: int = _K["n_clusters"],
        epsilon: Optional[float] = None,
        algorithm: Optional[str] = None,
        delta: Optional[float] = None,
        bounds: Optional[BoundsLike] = None,
        max_iter: Optional[int] = None,
        random_state: Optional[int] = None,
        diagnostics: bool = True,
        ledger: Optional[Ledger] = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.algorithm = algorithm
        self.delta = delta
        self.bounds = bounds
        self.max_iter = max_iter
        self.random_state = random_state
        self.diagnostics = diagnostics
        self.ledger = ledger

    def fit(self, X: Any, y: Any = None) -> "DPKMeans":
        """Clusters the rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The private records.
        y : ignored
            Accepted for scikit-learn's API.

        Returns
        -------
        self
            The fitted estimator.
        """
        x = _features(X)
        centroids, labels, release = self._call(
            _native.kmeans_fit,
            x,
            whole(self.n_clusters, "n_clusters"),
            _required_ranges(self.bounds, x.shape[1]),
            algorithm=_opt(str, self.algorithm),
            epsilon=_opt(float, self.epsilon),
            delta=_opt(float, self.delta),
            iterations=_opt(lambda v: whole(v, "max_iter"), self.max_iter),
            seed=_seed(self.random_state, "random_state"),
            ledger=native(self.ledger),
        )
        self.cluster_centers_ = centroids
        self.labels_ = labels
        self.n_features_in_ = x.shape[1]
        self._report(release)
        r = self.privacy_report_
        self.inertia_ = r.get("diagnostics", {}).get("inertia")
        self.n_iter_ = r["iterations"]
        self.epsilon_ = r.get("epsilon")
        self.delta_ = r.get("delta")
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "cluster_centers_"):
            raise ValueError("this DPKMeans is not fitted: call fit first")

    def transform(self, X: Any) -> np.ndarray:
        """Distances to every centroid (post-processing: no privacy cost).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records.

        Returns
        -------
        ndarray of shape (n_samples, n_clusters)
            Euclidean distances.
        """
        self._check_fitted()
        x = _features(X)
        d2 = ((x[:, None, :] - self.cluster_centers_[None, :, :]) ** 2).sum(axis=2)
        return np.sqrt(d2)

    def predict(self, X: Any) -> np.ndarray:
        """The nearest centroid of each row (post-processing: no privacy cost).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records.

        Returns
        -------
        ndarray of shape (n_samples,)
            Cluster indices.
        """
        return np.argmin(self.transform(X), axis=1)

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """``fit(X).labels_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The private records.
        y : ignored
            Accepted for scikit-learn's API.

        Returns
        -------
        ndarray of shape (n_samples,)
            Each record's cluster.
        """
        return self.fit(X).labels_

    def score(self, X: Any, y: Any = None) -> float:
        """Opposite of the sum of squared distances of ``X`` to its nearest centroids, as
        scikit-learn's ``KMeans.score`` (higher is better).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records (a diagnostic when they are private: computed without noise).
        y : ignored
            Accepted for scikit-learn's API.

        Returns
        -------
        float
            ``-inertia`` of ``X``.
        """
        return -float((self.transform(X).min(axis=1) ** 2).sum())


def load_model(path: Any, classes: Optional[Sequence[Any]] = None) -> _NetworkClassifier:
    """Reads a model file written by ``dpml train --save-model`` or ``save_model``.

    Parameters
    ----------
    path : str or os.PathLike
        The model file (safetensors with its architecture and privacy facts).
    classes : sequence, optional
        The classes of the model's outputs, in order. Default: the class names the file
        records (numbers when every name is a whole number), else ``0 .. outputs - 1``.

    Returns
    -------
    DPMLPClassifier or LabelDPClassifier
        A fitted estimator (by the file's guarantee) that predicts with the saved model.
        ``privacy_report_`` holds the file's privacy facts, as ``dpml inspect`` shows them.
    """
    model = _native.TrainedModel.load(str(path))
    facts = json.loads(model.facts_json()) or {"guarantee": "unknown"}
    est: _NetworkClassifier
    est = LabelDPClassifier() if facts.get("guarantee") == "label-dp" else DPMLPClassifier()
    if classes is None:
        names = facts.get("classes") or [str(i) for i in range(model.outputs)]
        whole = all(re.fullmatch(r"-?\d+", n) for n in names)
        classes = [int(n) for n in names] if whole else names
    est.classes = list(classes)
    est.model_ = model
    est.classes_ = np.asarray(classes)
    est.n_features_in_ = model.n_features
    est.privacy_report_ = facts
    est.epsilon_ = facts.get("epsilon")
    est.delta_ = facts.get("delta")
    return est
