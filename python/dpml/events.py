"""Privacy events in the style of Google's dp_accounting.

An event describes what a private computation did; accountants turn events into (epsilon,
delta). Each event converts to the JSON shape dpml's Rust core reads (the same as
``dpml account --events``), so no accounting happens in Python.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Sequence, Tuple


class DpEvent:
    """Base class of privacy events."""

    def to_dict(self) -> Dict[str, Any]:
        """The event as dpml's JSON object (with its ``"type"`` tag)."""
        raise NotImplementedError

    def to_json(self) -> str:
        """The event as dpml's JSON text."""
        return json.dumps(self.to_dict())


@dataclass(frozen=True)
class GaussianDpEvent(DpEvent):
    """Gaussian noise of standard deviation ``noise_multiplier`` times the L2 sensitivity."""

    noise_multiplier: float

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "gaussian", "noise_multiplier": float(self.noise_multiplier)}


@dataclass(frozen=True)
class LaplaceDpEvent(DpEvent):
    """Laplace noise of scale ``noise_multiplier`` times the L1 sensitivity (pure DP)."""

    noise_multiplier: float

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "laplace", "noise_multiplier": float(self.noise_multiplier)}


@dataclass(frozen=True)
class RandomizedResponse(DpEvent):
    """k-ary randomized response with the given epsilon and number of categories."""

    epsilon: float
    categories: int = 2

    def to_dict(self) -> Dict[str, Any]:
        return {
            "type": "randomized_response",
            "epsilon": float(self.epsilon),
            "categories": int(self.categories),
        }


@dataclass(frozen=True)
class EpsilonDeltaDpEvent(DpEvent):
    """A black-box (epsilon, delta)-DP step."""

    epsilon: float
    delta: float = 0.0

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "epsilon_delta", "epsilon": float(self.epsilon), "delta": float(self.delta)}


@dataclass(frozen=True)
class PoissonSampledDpEvent(DpEvent):
    """``event`` run on a Poisson subsample with inclusion probability ``sampling_probability``."""

    sampling_probability: float
    event: DpEvent

    def to_dict(self) -> Dict[str, Any]:
        return {
            "type": "poisson_sampled",
            "sampling_rate": float(self.sampling_probability),
            "event": self.event.to_dict(),
        }


@dataclass(frozen=True)
class SelfComposedDpEvent(DpEvent):
    """``event`` repeated ``count`` times, adaptively."""

    event: DpEvent
    count: int

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "self_composed", "event": self.event.to_dict(), "count": int(self.count)}


@dataclass(frozen=True)
class ComposedDpEvent(DpEvent):
    """A sequence of events, composed adaptively."""

    events: Tuple[DpEvent, ...]

    def __init__(self, events: Sequence[DpEvent]) -> None:
        object.__setattr__(self, "events", tuple(events))

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "composed", "events": [e.to_dict() for e in self.events]}


@dataclass(frozen=True)
class RepeatAndSelectDpEvent(DpEvent):
    """``event`` run K times, K drawn in secret with mean ``mean``, only the best output
    released: a private hyperparameter search (Papernot & Steinke 2022), as dp_accounting's
    event of that name. ``shape`` is the law: infinity for Poisson, else the truncated negative
    binomial with that eta (0: logarithmic, 1: geometric). Only the RDP accountant has a bound.
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


def dp_sgd_event(noise_multiplier: float, sample_rate: float, steps: int) -> DpEvent:
    """The DP-SGD event: ``steps`` Poisson-subsampled Gaussian steps."""
    return SelfComposedDpEvent(
        PoissonSampledDpEvent(sample_rate, GaussianDpEvent(noise_multiplier)), steps
    )


def event_from_dict(d: Dict[str, Any]) -> DpEvent:
    """The event of a dpml JSON object (as :meth:`DpEvent.to_dict` writes it)."""
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
        return PoissonSampledDpEvent(d["sampling_rate"], event_from_dict(d["event"]))
    if kind == "self_composed":
        return SelfComposedDpEvent(event_from_dict(d["event"]), d["count"])
    if kind == "composed":
        return ComposedDpEvent([event_from_dict(e) for e in d["events"]])
    if kind == "repeat_and_select":
        law = d["repetitions"]
        shape = float("inf") if law["law"] == "poisson" else law["eta"]
        return RepeatAndSelectDpEvent(event_from_dict(d["event"]), law["mean"], shape)
    return _RawEvent(d)


@dataclass(frozen=True)
class _RawEvent(DpEvent):
    """An event with no Python class of its own (e.g. discrete Gaussian), kept as JSON."""

    raw: Dict[str, Any]

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.raw)
