"""Differentially private statistics over one numeric array, as ``dpml query`` computes them.

Sensitivity comes from the declared ``bounds`` (values are clamped to them), never from the
data. Laplace noise by default; analytic Gaussian noise when ``delta`` is given. With a
``ledger`` the spend is recorded before the value is returned, and refused over budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _native
from ._args import number, real, text, whole
from ._args import seed as _seed
from .events import DpEvent, event_from_dict
from .ledger import Ledger, native, record

__all__ = ["Release", "count", "sum", "mean", "histogram"]


def __dir__() -> List[str]:
    return sorted(__all__)


Bounds = Tuple[float, float]


@dataclass
class Release:
    """A released statistic and what it cost (the names of ``dpml query``'s JSON).

    Attributes
    ----------
    value : float or ndarray
        The noisy statistic (an array of bin counts for a histogram).
    epsilon : float
        Total epsilon of the release.
    delta : float
        Total delta (0 for Laplace noise).
    sensitivity : float
        The sensitivity the noise was calibrated to.
    event : DpEvent
        The privacy event, for an accountant.
    ledger : dict or None
        The ledger's balance after the spend (``dpml query``'s ``"ledger"`` object), when a
        ledger was given.
    seeded : bool
        Whether the release was seeded (reproducible: not for real releases).
    """

    value: Union[float, np.ndarray]
    epsilon: float
    delta: float
    sensitivity: float
    event: DpEvent
    ledger: Optional[Dict[str, Any]] = None
    seeded: bool = False


def _records(kind: str, values: Any) -> np.ndarray:
    """The records as the native statistic takes them: one number per record.

    A count counts the records (the first axis: a record may be a row of several columns);
    the other statistics take one number per record, so a matrix is refused rather than
    flattened (each record would then count as many, and the noise be too small).
    """
    arr = np.asarray(values)
    if arr.ndim == 0:
        raise ValueError(f"values must be a sequence of records, got one value {values!r}")
    if kind == "count":
        return np.zeros(arr.shape[0])
    if arr.ndim != 1:
        raise ValueError(
            f"values must hold one number per record (a one-dimensional array), got shape "
            f"{arr.shape}: pass one column"
        )
    return np.ascontiguousarray(real(arr, "values").astype(np.float64))


def _bounds(bounds: Any) -> Tuple[float, float]:
    """Declared bounds as a pair of floats."""
    try:
        low, high = bounds
        return float(low), float(high)
    except (TypeError, ValueError):
        raise ValueError(f"bounds must be a pair (low, high) of numbers, got {bounds!r}") from None


def _release(
    kind: str,
    values: Any,
    epsilon: float,
    bounds: Optional[Bounds],
    bins: int,
    delta: Optional[float],
    seed: Optional[int],
    ledger: Optional[Ledger],
    label: Optional[str],
) -> Release:
    arr = _records(kind, values)
    b = None if bounds is None else _bounds(bounds)
    reply = _native.statistic(
        kind,
        arr,
        number(epsilon, "epsilon"),
        b,
        whole(bins, "bins"),
        None if delta is None else number(delta, "delta"),
        _seed(seed),
        native(ledger),
        None if label is None else text(label, "label"),
    )
    d = json.loads(reply)
    v = d["value"]
    return Release(
        value=np.asarray(v, dtype=np.float64) if isinstance(v, list) else float(v),
        epsilon=d["epsilon"],
        delta=d["delta"],
        sensitivity=d["sensitivity"],
        event=event_from_dict(d["event"]),
        ledger=None if d.get("ledger") is None else record(d["ledger"]),
        seeded=d["seeded"],
    )


def count(
    values: Any,
    epsilon: float,
    delta: Optional[float] = None,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
    label: Optional[str] = None,
) -> Release:
    """The number of records, with noise (sensitivity 1).

    Parameters
    ----------
    values : array-like
        The records (only their number is used: the length of the first axis, so a row of
        several columns is one record).
    epsilon : float
        Epsilon of the release.
    delta : float, optional
        With it, analytic Gaussian noise ((epsilon, delta)-DP); without, Laplace noise.
    seed : int, optional
        For tests only (a seeded release is not private).
    ledger : Ledger, optional
        A budget ledger charged before the value is returned (refused over budget).
    label : str, optional
        The entry's label in the ledger.

    Returns
    -------
    Release
        The value and what it cost.
    """
    return _release("count", values, epsilon, None, 1, delta, seed, ledger, label)


def sum(  # noqa: A001 - the statistic's name
    values: Any,
    epsilon: float,
    bounds: Bounds,
    delta: Optional[float] = None,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
    label: Optional[str] = None,
) -> Release:
    """The sum of the values clamped to ``bounds``, computed exactly, with noise.

    Parameters
    ----------
    values : array-like
        One number per record (a one-dimensional array: a matrix is refused, not flattened).
    epsilon : float
        Epsilon of the release.
    bounds : (float, float)
        Declared ``(low, high)``: values are clamped to them, and the sensitivity is
        ``max(|low|, |high|)``. Never read from the data.
    delta : float, optional
        With it, analytic Gaussian noise ((epsilon, delta)-DP); without, Laplace noise.
    seed : int, optional
        For tests only (a seeded release is not private).
    ledger : Ledger, optional
        A budget ledger charged before the value is returned (refused over budget).
    label : str, optional
        The entry's label in the ledger.

    Returns
    -------
    Release
        The value and what it cost.
    """
    return _release("sum", values, epsilon, bounds, 1, delta, seed, ledger, label)


def mean(
    values: Any,
    epsilon: float,
    bounds: Bounds,
    delta: Optional[float] = None,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
    label: Optional[str] = None,
) -> Release:
    """The mean of the values clamped to ``bounds``: a noisy sum over a noisy count, each with
    half the budget.

    Parameters
    ----------
    values : array-like
        One number per record (a one-dimensional array: a matrix is refused, not flattened).
    epsilon : float
        Epsilon of the release.
    bounds : (float, float)
        Declared ``(low, high)``.
    delta : float, optional
        With it, analytic Gaussian noise ((epsilon, delta)-DP); without, Laplace noise.
    seed : int, optional
        For tests only (a seeded release is not private).
    ledger : Ledger, optional
        A budget ledger charged before the value is returned (refused over budget).
    label : str, optional
        The entry's label in the ledger.

    Returns
    -------
    Release
        The value and what it cost.
    """
    return _release("mean", values, epsilon, bounds, 1, delta, seed, ledger, label)


def histogram(
    values: Any,
    epsilon: float,
    bounds: Bounds,
    bins: int = 10,
    delta: Optional[float] = None,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
    label: Optional[str] = None,
) -> Release:
    """Noisy counts of ``bins`` equal-width bins over ``bounds`` (values clamped).

    Parameters
    ----------
    values : array-like
        One number per record (a one-dimensional array: a matrix is refused, not flattened).
    epsilon : float
        Epsilon of the release.
    bounds : (float, float)
        Declared ``(low, high)``.
    bins : int, default 10
        Number of bins.
    delta : float, optional
        With it, analytic Gaussian noise ((epsilon, delta)-DP); without, Laplace noise.
    seed : int, optional
        For tests only (a seeded release is not private).
    ledger : Ledger, optional
        A budget ledger charged before the value is returned (refused over budget).
    label : str, optional
        The entry's label in the ledger.

    Returns
    -------
    Release
        The value and what it cost.
    """
    return _release("histogram", values, epsilon, bounds, bins, delta, seed, ledger, label)
