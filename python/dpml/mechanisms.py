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

__all__ = ["laplace", "gaussian", "discrete_laplace", "discrete_gaussian", "randomized_response"]


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
