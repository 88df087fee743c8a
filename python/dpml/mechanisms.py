"""Exact noise samplers, vectorised over arrays.

Each function adds independent noise to every entry of ``values`` with one mechanism whose
sensitivity is that of the whole array-valued query (L1 for Laplace, L2 for Gaussian), and
returns ``(noisy_values, event)``: the event is the privacy cost of the whole call, ready for
:func:`dpml.accounting.epsilon` or a :class:`dpml.Ledger`. Pass ``seed`` only for tests (a
seeded release is reproducible, hence not private).
"""

from __future__ import annotations

import json
from typing import Any, Optional, Tuple

import numpy as np

from . import _native
from .events import DpEvent, event_from_dict

__all__ = [
    "laplace",
    "gaussian",
    "discrete_laplace",
    "discrete_gaussian",
    "randomized_response",
    "rr_with_prior",
]


def _floats(values: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(values, dtype=np.float64).reshape(-1))


def _ints(values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "biu":
        raise ValueError(f"values must be integers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr.astype(np.int64).reshape(-1))


def _out(shape: Tuple[int, ...], result: Tuple[np.ndarray, str]) -> Tuple[np.ndarray, DpEvent]:
    values, event = result
    return values.reshape(shape), event_from_dict(json.loads(event))


def laplace(
    values: Any, sensitivity: float, epsilon: float, seed: Optional[int] = None
) -> Tuple[np.ndarray, DpEvent]:
    """Laplace noise of scale ``sensitivity / epsilon`` on a grid (pure epsilon-DP)."""
    shape = np.shape(values)
    return _out(shape, _native.laplace(_floats(values), float(sensitivity), float(epsilon), seed))


def gaussian(
    values: Any, sensitivity: float, epsilon: float, delta: float, seed: Optional[int] = None
) -> Tuple[np.ndarray, DpEvent]:
    """Analytic Gaussian noise (Balle and Wang 2018) calibrated to (epsilon, delta)."""
    shape = np.shape(values)
    return _out(
        shape,
        _native.gaussian(_floats(values), float(sensitivity), float(epsilon), float(delta), seed),
    )


def discrete_laplace(
    values: Any, sensitivity: int, epsilon: float, seed: Optional[int] = None
) -> Tuple[np.ndarray, DpEvent]:
    """Exact discrete Laplace noise on integers (Canonne, Kamath, Steinke 2020)."""
    shape = np.shape(values)
    return _out(shape, _native.discrete_laplace(_ints(values), int(sensitivity), float(epsilon), seed))


def discrete_gaussian(
    values: Any, sensitivity: int, epsilon: float, delta: float, seed: Optional[int] = None
) -> Tuple[np.ndarray, DpEvent]:
    """Exact discrete Gaussian noise on integers, calibrated to (epsilon, delta)."""
    shape = np.shape(values)
    return _out(
        shape,
        _native.discrete_gaussian(
            _ints(values), int(sensitivity), float(epsilon), float(delta), seed
        ),
    )


def randomized_response(
    values: Any, epsilon: float, categories: int = 2, seed: Optional[int] = None
) -> Tuple[np.ndarray, DpEvent]:
    """k-ary randomized response on category indices ``0..categories``: each record's answer
    is epsilon-local-DP; the event is that of one record's response."""
    shape = np.shape(values)
    return _out(
        shape, _native.randomized_response(_ints(values), float(epsilon), int(categories), seed)
    )


def rr_with_prior(
    labels: Any,
    priors: Any,
    epsilon: float,
    rule: str = "expected-accuracy",
    seed: Optional[int] = None,
) -> Tuple[np.ndarray, np.ndarray, DpEvent]:
    """RR-with-prior (Ghazi et al. 2021, "Deep learning with label differential privacy"):
    each label ``labels[i]`` in ``0..K`` is released by randomized response over the candidate
    classes its prior ``priors[i]`` (a row of ``[n, K]``) makes likely; epsilon-label-DP per
    record, provided the priors do not depend on the private labels (e.g. a model trained on
    other records' privatised labels). ``rule`` chooses the candidate set: the paper's
    ``"expected-accuracy"`` or ``"information"`` (largest mutual information; may use a unary
    encoding). Returns ``(released, likelihood, event)``: the released class of each record,
    the probability of its output under every possible true label ``[n, K]`` (what a learner
    trains on), and the event of one record's release."""
    y = _ints(labels)
    p = np.ascontiguousarray(np.asarray(priors, dtype=np.float64))
    if p.ndim != 2:
        raise ValueError(f"priors must be two-dimensional [n, classes], got shape {p.shape}")
    released, likelihood, event = _native.rr_with_prior(y, p, float(epsilon), str(rule), seed)
    return released, likelihood, event_from_dict(json.loads(event))
