"""Exact noise samplers, vectorised over arrays.

Each function adds independent noise to every entry of ``values`` with one mechanism whose
sensitivity is that of the whole array-valued query (L1 for Laplace, L2 for Gaussian, the
rounding of every entry to the noise grid included), and returns ``(noisy_values, event)``:
the event is the privacy cost of the whole call, ready for :func:`dpml.accounting.epsilon`.
With ``ledger=`` (a :class:`dpml.Ledger`) the call is charged as the command line charges
``--ledger``: refused before any noise is drawn when it would overspend, recorded before the
values are returned. A scalar in gives a scalar out: an ``int`` for the integer-valued
mechanisms. Pass ``seed`` only for tests (a seeded release is reproducible, hence not
private).
"""

from __future__ import annotations

import json
from typing import Any, List, Optional, Tuple

import numpy as np

from . import _native
from ._args import count, real
from ._args import seed as _seed
from .events import DpEvent, event_from_dict
from .ledger import Ledger, native

__all__ = [
    "laplace",
    "gaussian",
    "discrete_laplace",
    "discrete_gaussian",
    "randomized_response",
    "rr_with_prior",
]


def __dir__() -> List[str]:
    return sorted(__all__)


def _floats(values: Any) -> np.ndarray:
    return np.ascontiguousarray(real(values, "values").astype(np.float64).reshape(-1))


def _ints(values: Any, name: str = "values") -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "biu":
        raise ValueError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} must fit a 64-bit signed integer, got {arr.max()}")
    return np.ascontiguousarray(arr.astype(np.int64).reshape(-1))


def _out(values: Any, result: Tuple[np.ndarray, str]) -> Tuple[Any, DpEvent]:
    """The noisy values in the shape of the input (a Python number for a scalar input)."""
    noisy, event = result
    shape = np.shape(values)
    out: Any = noisy.reshape(shape)
    if shape == ():
        out = out.item()
    return out, event_from_dict(json.loads(event))


def laplace(
    values: Any,
    sensitivity: float,
    epsilon: float,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[Any, DpEvent]:
    """Laplace noise on every entry (pure epsilon-DP), sampled exactly on a fine grid.

    Parameters
    ----------
    values : float or array-like
        The true values: one query answer (a vector of ``values.size`` entries).
    sensitivity : float
        L1 sensitivity of the whole array (how much one record changes the sum of the
        entries' absolute changes).
    epsilon : float
        Epsilon of the release.
    seed : int, optional
        For tests only.
    ledger : Ledger, optional
        A budget ledger charged before the values are returned (refused over budget, before
        any noise is drawn).

    Returns
    -------
    (float or ndarray, DpEvent)
        The noisy values, in the input's shape, and the event of the whole call. The noise
        scale is sensitivity/epsilon, slightly more for the grid rounding of every entry.

    Examples
    --------
    >>> from dpml.mechanisms import laplace
    >>> noisy, event = laplace([10.0, 20.0], sensitivity=1.0, epsilon=1.0)
    """
    return _out(
        values,
        _native.laplace(_floats(values), float(sensitivity), float(epsilon), _seed(seed), native(ledger)),
    )


def gaussian(
    values: Any,
    sensitivity: float,
    epsilon: float,
    delta: float,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[Any, DpEvent]:
    """Analytic Gaussian noise (Balle and Wang 2018) calibrated to (epsilon, delta).

    Parameters
    ----------
    values : float or array-like
        The true values.
    sensitivity : float
        L2 sensitivity of the whole array.
    epsilon : float
        Epsilon of the release.
    delta : float
        Delta of the release.
    seed : int, optional
        For tests only.
    ledger : Ledger, optional
        A budget ledger charged before the values are returned (refused over budget, before
        any noise is drawn).

    Returns
    -------
    (float or ndarray, DpEvent)
        The noisy values and the event of the whole call.
    """
    return _out(
        values,
        _native.gaussian(
            _floats(values), float(sensitivity), float(epsilon), float(delta), _seed(seed), native(ledger)
        ),
    )


def discrete_laplace(
    values: Any,
    sensitivity: int,
    epsilon: float,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[Any, DpEvent]:
    """Exact discrete Laplace noise on integers (Canonne, Kamath, Steinke 2020).

    Parameters
    ----------
    values : int or array-like of int
        The true counts.
    sensitivity : int
        L1 sensitivity.
    epsilon : float
        Epsilon of the release.
    seed : int, optional
        For tests only.
    ledger : Ledger, optional
        A budget ledger charged before the values are returned (refused over budget, before
        any noise is drawn).

    Returns
    -------
    (int or ndarray of int64, DpEvent)
        The noisy counts and the event.
    """
    return _out(
        values,
        _native.discrete_laplace(
            _ints(values), count(sensitivity, "sensitivity"), float(epsilon), _seed(seed), native(ledger)
        ),
    )


def discrete_gaussian(
    values: Any,
    sensitivity: int,
    epsilon: float,
    delta: float,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[Any, DpEvent]:
    """Exact discrete Gaussian noise on integers, calibrated to (epsilon, delta).

    Parameters
    ----------
    values : int or array-like of int
        The true counts.
    sensitivity : int
        L2 sensitivity.
    epsilon : float
        Epsilon of the release.
    delta : float
        Delta of the release.
    seed : int, optional
        For tests only.
    ledger : Ledger, optional
        A budget ledger charged before the values are returned (refused over budget, before
        any noise is drawn).

    Returns
    -------
    (int or ndarray of int64, DpEvent)
        The noisy counts and the event.
    """
    return _out(
        values,
        _native.discrete_gaussian(
            _ints(values),
            count(sensitivity, "sensitivity"),
            float(epsilon),
            float(delta),
            _seed(seed),
            native(ledger),
        ),
    )


def randomized_response(
    values: Any,
    epsilon: float,
    categories: int = 2,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[Any, DpEvent]:
    """k-ary randomized response on category indices (local DP).

    Parameters
    ----------
    values : int or array-like of int
        Each respondent's true category in ``0 .. categories - 1``.
    epsilon : float
        Epsilon of each answer.
    categories : int, default 2
        Number of categories k.
    seed : int, optional
        For tests only.
    ledger : Ledger, optional
        A budget ledger charged before the values are returned (refused over budget, before
        any noise is drawn).

    Returns
    -------
    (int or ndarray of int64, DpEvent)
        Each randomised answer, and the event of one respondent's answer.
    """
    return _out(
        values,
        _native.randomized_response(
            _ints(values), float(epsilon), count(categories, "categories"), _seed(seed), native(ledger)
        ),
    )


def rr_with_prior(
    labels: Any,
    priors: Any,
    epsilon: float,
    rule: Optional[str] = None,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[np.ndarray, np.ndarray, DpEvent]:
    """RR-with-prior (Ghazi et al. 2021, "Deep learning with label differential privacy").

    Each label is released by randomized response over the candidate classes its prior
    makes likely: epsilon-label-DP per record, provided the priors do not depend on the
    private labels (e.g. a model trained on other records' privatised labels).

    Parameters
    ----------
    labels : array-like of int, shape (n,)
        The private labels in ``0 .. K - 1``.
    priors : array-like, shape (n, K)
        Each record's public prior over the classes.
    epsilon : float
        Epsilon of each label.
    rule : str, optional
        How the candidate set is chosen: ``"information"`` (largest mutual information; may
        use a unary encoding) or the paper's ``"expected-accuracy"``. Default: dpml's, as
        ``dpml label-dp --top-k-rule`` (``dpml.learn.DEFAULTS["top_k_rule"]``).
    seed : int, optional
        For tests only.
    ledger : Ledger, optional
        A budget ledger charged before the values are returned (refused over budget, before
        any noise is drawn).

    Returns
    -------
    (ndarray, ndarray, DpEvent)
        The released class of each record, the probability of its output under every
        possible true label ``[n, K]`` (what a learner trains on), and the event of one
        record's release.
    """
    y = _ints(labels, "labels")
    p = np.ascontiguousarray(np.asarray(priors, dtype=np.float64))
    if p.ndim != 2:
        raise ValueError(f"priors must be two-dimensional [n, classes], got shape {p.shape}")
    released, likelihood, event = _native.rr_with_prior(
        y, p, float(epsilon), None if rule is None else str(rule), _seed(seed), native(ledger)
    )
    return released, likelihood, event_from_dict(json.loads(event))
