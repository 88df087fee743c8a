"""Private estimators in scikit-learn's conventions.

``fit`` returns ``self``; ``get_params``/``set_params`` follow the ``__init__`` signature (so
``sklearn.base.clone`` and ``cross_val_score`` work without importing scikit-learn here);
fitted attributes end with an underscore. Every fitted estimator has ``epsilon_``, ``delta_``
and ``privacy_report_`` (the fields of the CLI's JSON). Bounds on the features are declared,
never read from the data: one ``(low, high)`` pair for every feature or a list of pairs.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native

__all__ = ["DPLogisticRegression", "DPMLPClassifier", "DPKMeans", "LabelDPClassifier"]

BoundsLike = Union[Tuple[float, float], Sequence[Tuple[float, float]]]

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


class _Params(_Base):
    """get_params/set_params from the ``__init__`` signature, as sklearn's BaseEstimator."""

    @classmethod
    def _param_names(cls) -> List[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> Dict[str, Any]:
        """The constructor's parameters."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> "_Params":
        """Sets constructor parameters; returns self."""
        valid = self._param_names()
        for k, v in params.items():
            if k not in valid:
                raise ValueError(f"invalid parameter {k!r} for {type(self).__name__}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def _features(X: Any) -> np.ndarray:
    x = np.ascontiguousarray(X, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"X must be two-dimensional [n_samples, n_features], got shape {x.shape}")
    return x


def _ranges(bounds: Optional[BoundsLike], d: int) -> List[Tuple[float, float]]:
    if bounds is None:
        raise ValueError(
            "bounds are required: declare (low, high) for every feature or one pair per "
            "feature; they must not come from the data"
        )
    b = np.asarray(bounds, dtype=np.float64)
    if b.shape == (2,):
        return [(float(b[0]), float(b[1]))] * d
    if b.shape == (d, 2):
        return [(float(lo), float(hi)) for lo, hi in b]
    raise ValueError(
        f"bounds must be one (low, high) pair or {d} pairs (one per feature), got shape {b.shape}"
    )


class _NetworkClassifier(_ClassifierMixin, _Params):
    """What every network classifier shares: declared classes, and prediction from the fitted
    ``model_`` (post-processing of a private model: no privacy cost)."""

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

    def _fitted(self, model: Any, classes: np.ndarray, x: np.ndarray, report: str) -> None:
        self.model_ = model
        self.classes_ = classes
        self.n_features_in_ = x.shape[1]
        self.privacy_report_ = json.loads(report)

    def decision_function(self, X: Any) -> np.ndarray:
        """The network's logits ``[n, classes]`` (post-processing: no privacy cost)."""
        if not hasattr(self, "model_"):
            raise ValueError(f"this {type(self).__name__} is not fitted: call fit first")
        x = _features(X)
        if x.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {x.shape[1]} features, the model was fitted on {self.n_features_in_}"
            )
        return np.asarray(self.model_.predict_logits(x), dtype=np.float64)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (softmax of the logits)."""
        z = self.decision_function(X)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        """The most likely class of each row."""
        logits = self.decision_function(X)
        return self.classes_[np.argmax(logits, axis=1)]

    def score(self, X: Any, y: Any) -> float:
        """Accuracy on ``(X, y)``."""
        return float(np.mean(self.predict(X) == np.asarray(y)))


class _DPSGDClassifier(_NetworkClassifier):
    _model = ""

    def _fit(self, X: Any, y: Any, overrides: Dict[str, Any]) -> "_DPSGDClassifier":
        x = _features(X)
        classes, labels = self._class_indices(x, y)
        if (self.epsilon is None) == (self.noise_multiplier is None):
            raise ValueError("give exactly one of epsilon and noise_multiplier")
        privacy = (
            {"kind": "target_epsilon", "value": float(self.epsilon)}
            if self.epsilon is not None
            else {"kind": "noise_multiplier", "value": float(self.noise_multiplier)}
        )
        recipe = {
            "model": self._model,
            "privacy": privacy,
            "delta": float(self.delta),
            "max_grad_norm": float(self.max_grad_norm),
            "epochs": float(self.epochs),
            "batch_size": int(self.batch_size),
            "learning_rate": float(self.learning_rate),
            **overrides,
        }
        model, report = _native.dpsgd_fit(
            x,
            labels,
            len(classes),
            _ranges(self.bounds, x.shape[1]),
            json.dumps(recipe),
            self.random_state,
        )
        self._fitted(model, classes, x, report)
        self.epsilon_ = self.privacy_report_.get("epsilon")
        self.delta_ = self.privacy_report_.get("delta")
        return self

class DPMLPClassifier(_DPSGDClassifier):
    """A multilayer perceptron trained with DP-SGD (Poisson sampling, per-example clipping to
    ``max_grad_norm``, exact discrete Gaussian noise), from ``dpml train``'s tabular recipe.

    Give ``epsilon`` (the noise is calibrated so that the final epsilon at ``delta`` does not
    exceed it, PLD accountant) or ``noise_multiplier``. Features are min-max scaled from the
    declared ``bounds`` (and clamped to them).
    """

    _model = "mlp"

    def __init__(
        self,
        epsilon: Optional[float] = 3.0,
        noise_multiplier: Optional[float] = None,
        delta: float = 1e-5,
        max_grad_norm: float = 1.0,
        epochs: float = 30,
        batch_size: int = 64,
        learning_rate: float = 0.5,
        hidden_layer_sizes: Sequence[int] = (32,),
        bounds: Optional[BoundsLike] = None,
        classes: Optional[Sequence[Any]] = None,
        random_state: Optional[int] = None,
        arch: Optional[Dict[str, Any]] = None,
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

    def fit(self, X: Any, y: Any) -> "DPMLPClassifier":
        """Trains on ``(X, y)``; returns self. With ``arch`` (a dict in the JSON form of
        ``dpml train --arch``, ``input_shape`` ``[n_features]``, the last layer giving one
        score per class) that network is trained instead of the hidden layers."""
        overrides: Dict[str, Any] = {"hidden": [int(h) for h in self.hidden_layer_sizes]}
        if self.arch is not None:
            overrides["arch"] = self.arch
        return self._fit(X, y, overrides)


class DPLogisticRegression(_DPSGDClassifier):
    """Multinomial logistic regression trained with DP-SGD (see :class:`DPMLPClassifier`)."""

    _model = "logreg"

    def __init__(
        self,
        epsilon: Optional[float] = 3.0,
        noise_multiplier: Optional[float] = None,
        delta: float = 1e-5,
        max_grad_norm: float = 1.0,
        epochs: float = 30,
        batch_size: int = 64,
        learning_rate: float = 0.5,
        bounds: Optional[BoundsLike] = None,
        classes: Optional[Sequence[Any]] = None,
        random_state: Optional[int] = None,
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

    def fit(self, X: Any, y: Any) -> "DPLogisticRegression":
        """Trains on ``(X, y)``; returns self."""
        return self._fit(X, y, {})


class DPKMeans(_ClusterMixin, _Params):
    """k-means with DP-Lloyd (noisy counts and sums per iteration) inside declared ``bounds``;
    ``epsilon=None`` runs plain (non-private) Lloyd."""

    def __init__(
        self,
        n_clusters: int = 8,
        epsilon: Optional[float] = 1.0,
        bounds: Optional[BoundsLike] = None,
        max_iter: Optional[int] = None,
        random_state: Optional[int] = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_iter = max_iter
        self.random_state = random_state

    def fit(self, X: Any, y: Any = None) -> "DPKMeans":
        """Clusters the rows of ``X``; returns self."""
        x = _features(X)
        centroids, report = _native.kmeans_fit(
            x,
            int(self.n_clusters),
            None if self.epsilon is None else float(self.epsilon),
            _ranges(self.bounds, x.shape[1]),
            self.max_iter,
            self.random_state,
        )
        self.cluster_centers_ = centroids
        self.n_features_in_ = x.shape[1]
        self.privacy_report_ = json.loads(report)
        self.epsilon_ = self.privacy_report_.get("epsilon")
        self.delta_ = self.privacy_report_.get("delta")
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The nearest centre of each row (post-processing: no privacy cost)."""
        if not hasattr(self, "cluster_centers_"):
            raise ValueError("this DPKMeans is not fitted: call fit first")
        x = _features(X)
        d2 = ((x[:, None, :] - self.cluster_centers_[None, :, :]) ** 2).sum(axis=2)
        return np.argmin(d2, axis=1)

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """``fit(X).predict(X)``."""
        return self.fit(X).predict(X)


class LabelDPClassifier(_NetworkClassifier):
    """Label differential privacy (``dpml label-dp``): each training label is privatised once
    (epsilon-label-DP per record) and a network is trained on the privatised labels without
    gradient noise. Only the labels are protected: the features are treated as public.

    ``mechanism`` is ``"rr-prior"`` (RR-with-prior over ``stages`` stages, Ghazi et al. 2021),
    ``"rr"`` (k-ary randomized response) or ``"laplace"`` (Laplace noise of scale 2/epsilon on
    the one-hot label, clamped and rounded). The network is ``dpml label-dp``'s default recipe
    (a 512-unit MLP, Adam, an averaged model) unless ``hidden_layer_sizes``, ``epochs``,
    ``batch_size`` or ``learning_rate`` say otherwise. ``privacy_report_`` holds the CLI's
    fields; ``noisy_label_accuracy`` compares the noisy labels with the true ones, so it sits
    under ``privacy_report_["diagnostics"]``: a diagnostic, not a private release.
    """

    def __init__(
        self,
        epsilon: float = 1.0,
        mechanism: str = "rr-prior",
        stages: Optional[int] = None,
        hidden_layer_sizes: Sequence[int] = (512,),
        epochs: Optional[float] = None,
        batch_size: Optional[int] = None,
        learning_rate: Optional[float] = None,
        bounds: Optional[BoundsLike] = None,
        classes: Optional[Sequence[Any]] = None,
        random_state: Optional[int] = None,
    ) -> None:
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.stages = stages
        self.hidden_layer_sizes = hidden_layer_sizes
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.bounds = bounds
        self.classes = classes
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> "LabelDPClassifier":
        """Privatises the labels of ``y`` and trains on ``(X, noisy labels)``; returns self."""
        x = _features(X)
        classes, labels = self._class_indices(x, y)
        recipe: Dict[str, Any] = {"hidden": [int(h) for h in self.hidden_layer_sizes]}
        if self.epochs is not None:
            recipe["epochs"] = float(self.epochs)
        if self.batch_size is not None:
            recipe["batch_size"] = int(self.batch_size)
            recipe["physical_batch_size"] = int(self.batch_size)
        if self.learning_rate is not None:
            recipe["learning_rate"] = float(self.learning_rate)
        model, report = _native.label_dp_fit(
            x,
            labels,
            len(classes),
            _ranges(self.bounds, x.shape[1]),
            str(self.mechanism),
            float(self.epsilon),
            json.dumps(recipe),
            None if self.stages is None else int(self.stages),
            self.random_state,
        )
        self._fitted(model, classes, x, report)
        r = self.privacy_report_
        r["diagnostics"] = {"noisy_label_accuracy": r.pop("noisy_label_accuracy", None)}
        for k in ("test_accuracy", "test_mse", "test_mae", "test_size"):
            r.pop(k, None)
        self.epsilon_ = r["epsilon"]
        self.delta_ = 0.0
        return self
