"""Privacy events in the style of Google's dp_accounting.

An event describes what a private computation did; accountants turn events into (epsilon,
delta). Each event converts to the JSON shape dpml's Rust core reads (the same as ``dpml
account --events``), so no accounting happens in Python. dp_accounting's own event objects
are accepted wherever an event is (see :func:`from_dp_accounting`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._args import whole

__all__ = [
    "DpEvent",
    "GaussianDpEvent",
    "LaplaceDpEvent",
    "RandomizedResponse",
    "EpsilonDeltaDpEvent",
    "PoissonSampledDpEvent",
    "SelfComposedDpEvent",
    "ComposedDpEvent",
    "RepeatAndSelectDpEvent",
    "dp_sgd_event",
    "event_from_dict",
    "from_dp_accounting",
]


def __dir__() -> List[str]:
    return sorted(__all__)


class DpEvent:
    """Base class of privacy events."""

    def to_dict(self) -> Dict[str, Any]:
        """The event as dpml's JSON object.

        Returns
        -------
        dict
            The object, with its ``"type"`` tag.
        """
        raise NotImplementedError

    def to_json(self) -> str:
        """The event as dpml's JSON text.

        Returns
        -------
        str
            ``json.dumps`` of :meth:`to_dict`.
        """
        return json.dumps(self.to_dict())


@dataclass(frozen=True)
class GaussianDpEvent(DpEvent):
    """Gaussian noise of standard deviation ``noise_multiplier`` times the L2 sensitivity.

    Parameters
    ----------
    noise_multiplier : float
        sigma divided by the L2 sensitivity.
    """

    noise_multiplier: float

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "gaussian", "noise_multiplier": float(self.noise_multiplier)}


@dataclass(frozen=True)
class LaplaceDpEvent(DpEvent):
    """Laplace noise of scale ``noise_multiplier`` times the L1 sensitivity (pure DP).

    Parameters
    ----------
    noise_multiplier : float
        The Laplace scale divided by the L1 sensitivity (epsilon = 1 / noise_multiplier).
    """

    noise_multiplier: float

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "laplace", "noise_multiplier": float(self.noise_multiplier)}


@dataclass(frozen=True)
class RandomizedResponse(DpEvent):
    """k-ary randomized response with the given epsilon and number of categories.

    Parameters
    ----------
    epsilon : float
        Epsilon of one response.
    categories : int, default 2
        Number of answer categories k.
    """

    epsilon: float
    categories: int = 2

    def to_dict(self) -> Dict[str, Any]:
        return {
            "type": "randomized_response",
            "epsilon": float(self.epsilon),
            "categories": whole(self.categories, "categories"),
        }


@dataclass(frozen=True)
class EpsilonDeltaDpEvent(DpEvent):
    """A black-box (epsilon, delta)-DP step.

    Parameters
    ----------
    epsilon : float
        Its epsilon.
    delta : float, default 0
        Its delta.
    """

    epsilon: float
    delta: float = 0.0

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "epsilon_delta", "epsilon": float(self.epsilon), "delta": float(self.delta)}


@dataclass(frozen=True, init=False)
class PoissonSampledDpEvent(DpEvent):
    """``event`` run on a Poisson subsample: each record joins with probability
    ``sampling_rate``.

    Parameters
    ----------
    sampling_rate : float
        The inclusion probability q (dpml's name, as ``--sampling-rate``).
    event : DpEvent
        What runs on the subsample.
    sampling_probability : float, optional
        dp_accounting's name for ``sampling_rate`` (give one of the two).
    """

    sampling_rate: float
    event: DpEvent

    def __init__(
        self,
        sampling_rate: Optional[float] = None,
        event: Optional[DpEvent] = None,
        *,
        sampling_probability: Optional[float] = None,
    ) -> None:
        if (sampling_rate is None) == (sampling_probability is None):
            raise ValueError("give one of sampling_rate and sampling_probability")
        if event is None:
            raise ValueError("event is required: the event run on the subsample")
        rate = sampling_rate if sampling_rate is not None else sampling_probability
        object.__setattr__(self, "sampling_rate", rate)
        object.__setattr__(self, "event", event)

    @property
    def sampling_probability(self) -> float:
        """dp_accounting's name for :attr:`sampling_rate`."""
        return self.sampling_rate

    def to_dict(self) -> Dict[str, Any]:
        return {
            "type": "poisson_sampled",
            "sampling_rate": float(self.sampling_rate),
            "event": self.event.to_dict(),
        }


@dataclass(frozen=True)
class SelfComposedDpEvent(DpEvent):
    """``event`` repeated ``count`` times, adaptively.

    Parameters
    ----------
    event : DpEvent
        The repeated event.
    count : int
        How many times.
    """

    event: DpEvent
    count: int

    def to_dict(self) -> Dict[str, Any]:
        count = whole(self.count, "count")
        return {"type": "self_composed", "event": self.event.to_dict(), "count": count}


@dataclass(frozen=True)
class ComposedDpEvent(DpEvent):
    """A sequence of events, composed adaptively.

    Parameters
    ----------
    events : sequence of DpEvent
        The events, in order.
    """

    events: Tuple[DpEvent, ...]

    def __init__(self, events: Sequence[DpEvent]) -> None:
        object.__setattr__(self, "events", tuple(events))

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "composed", "events": [e.to_dict() for e in self.events]}


@dataclass(frozen=True)
class RepeatAndSelectDpEvent(DpEvent):
    """``event`` run K times, K drawn in secret, and only the best output released.

    A private hyperparameter search (Papernot & Steinke 2022), as dp_accounting's event of
    that name. Only the RDP accountant has a bound for it.

    Parameters
    ----------
    event : DpEvent
        One run, including the noisy score it is selected by.
    mean : float
        The mean number of runs, in [1, 1000].
    shape : float, default inf
        The law of K: infinity for Poisson, else the eta of the truncated negative binomial
        (> -1; 0: logarithmic, 1: geometric).
    """

    event: DpEvent
    mean: float
    shape: float = float("inf")

    def to_dict(self) -> Dict[str, Any]:
        if self.shape == float("inf"):
            law: Dict[str, Any] = {"law": "poisson", "mean": float(self.mean)}
        else:
            law = {
                "law": "truncated_negative_binomial",
                "eta": float(self.shape),
                "mean": float(self.mean),
            }
        return {"type": "repeat_and_select", "repetitions": law, "event": self.event.to_dict()}


def dp_sgd_event(noise_multiplier: float, sampling_rate: float, steps: int) -> DpEvent:
    """The DP-SGD event: ``steps`` Poisson-subsampled Gaussian steps.

    Parameters
    ----------
    noise_multiplier : float
        sigma / C of each step.
    sampling_rate : float
        Poisson sampling rate q = B / N.
    steps : int
        Number of steps T.

    Returns
    -------
    DpEvent
        ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), T)``.
    """
    return SelfComposedDpEvent(
        PoissonSampledDpEvent(sampling_rate, GaussianDpEvent(noise_multiplier)), steps
    )


def event_from_dict(d: Dict[str, Any]) -> DpEvent:
    """The event of a dpml JSON object (as :meth:`DpEvent.to_dict` writes it).

    Parameters
    ----------
    d : dict
        A dpml event object.

    Returns
    -------
    DpEvent
        The event (events without a Python class of their own, such as the discrete
        Gaussian, keep their JSON).
    """
    try:
        return _event_of(d)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"not a dpml event object ({type(e).__name__}: {e}): {d!r:.200}") from None


def _event_of(d: Dict[str, Any]) -> DpEvent:
    """:func:`event_from_dict`, raising KeyError or TypeError for a malformed object."""
    kind = d.get("type")
    if kind == "gaussian":
        return GaussianDpEvent(d["noise_multiplier"])
    if kind == "laplace":
        return LaplaceDpEvent(d["noise_multiplier"])
    if kind == "randomized_response":
        return RandomizedResponse(d["epsilon"], d["categories"])
    if kind == "epsilon_delta":
        return EpsilonDeltaDpEvent(d["epsilon"], d["delta"])
    if kind == "poisson_sampled":
        return PoissonSampledDpEvent(d["sampling_rate"], _event_of(d["event"]))
    if kind == "self_composed":
        return SelfComposedDpEvent(_event_of(d["event"]), d["count"])
    if kind == "composed":
        return ComposedDpEvent([_event_of(e) for e in d["events"]])
    if kind == "repeat_and_select":
        law = d["repetitions"]
        shape = float("inf") if law["law"] == "poisson" else law["eta"]
        return RepeatAndSelectDpEvent(_event_of(d["event"]), law["mean"], shape)
    return _RawEvent(d)


@dataclass(frozen=True)
class _RawEvent(DpEvent):
    """An event with no Python class of its own (e.g. discrete Gaussian), kept as JSON."""

    raw: Dict[str, Any]

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.raw)


def _dp_accounting_rr(noise_parameter: float, num_buckets: int) -> DpEvent:
    # With probability 1 - p the true bucket, else a uniform one: the output is the true
    # bucket with probability 1 - p + p/k, each other with p/k, so
    # epsilon = log(1 + k (1 - p) / p).
    p, k = float(noise_parameter), whole(num_buckets, "num_buckets")
    if not 0.0 < p <= 1.0:
        raise ValueError(
            f"RandomizedResponseDpEvent noise_parameter must be in (0, 1] to be private, got {p}"
        )
    return RandomizedResponse(math.log1p(k * (1.0 - p) / p), k)


def from_dp_accounting(event: Any) -> DpEvent:
    """dpml's event for one of Google dp_accounting's ``DpEvent`` objects.

    Parameters
    ----------
    event : dp_accounting.DpEvent
        A Gaussian, Laplace, randomized-response, (epsilon, delta), no-op, Poisson-sampled,
        self-composed, composed or repeat-and-select event (nested as dp_accounting nests
        them).

    Returns
    -------
    DpEvent
        The same event in dpml's classes.

    Raises
    ------
    ValueError
        For an event dpml cannot account (named by its class).
    """
    name = type(event).__name__
    if name == "GaussianDpEvent":
        return GaussianDpEvent(event.noise_multiplier)
    if name == "LaplaceDpEvent":
        return LaplaceDpEvent(event.noise_multiplier)
    if name == "EpsilonDeltaDpEvent":
        return EpsilonDeltaDpEvent(event.epsilon, event.delta)
    if name == "NoOpDpEvent":
        return EpsilonDeltaDpEvent(0.0, 0.0)
    if name == "RandomizedResponseDpEvent":
        return _dp_accounting_rr(event.noise_parameter, event.num_buckets)
    if name == "PoissonSampledDpEvent":
        return PoissonSampledDpEvent(
            sampling_probability=event.sampling_probability,
            event=from_dp_accounting(event.event),
        )
    if name == "SelfComposedDpEvent":
        return SelfComposedDpEvent(from_dp_accounting(event.event), event.count)
    if name == "ComposedDpEvent":
        return ComposedDpEvent([from_dp_accounting(e) for e in event.events])
    if name == "RepeatAndSelectDpEvent":
        return RepeatAndSelectDpEvent(from_dp_accounting(event.event), event.mean, event.shape)
    raise ValueError(f"dpml cannot account dp_accounting's {name}")


def to_event(event: Any) -> DpEvent:
    """dpml's event for ``event``: a dpml event, a dpml JSON object, or a dp_accounting event.

    Parameters
    ----------
    event : DpEvent, dict or dp_accounting.DpEvent
        The event.

    Returns
    -------
    DpEvent
        The event in dpml's classes.
    """
    if isinstance(event, DpEvent):
        return event
    if isinstance(event, dict):
        return event_from_dict(event)
    if type(event).__module__.split(".")[0] == "dp_accounting":
        return from_dp_accounting(event)
    raise ValueError(
        "event must be a dpml DpEvent, a dict or a dp_accounting DpEvent, got "
        f"{type(event).__name__}"
    )
