"""Privacy accounting: Opacus-style accountants, events, calibration and f-DP curves.

The accountants have the interface of Opacus's ``IAccountant`` (``step``, ``get_epsilon``,
``history``, ``len()``, ``mechanism()``, ``get_optimizer_hook_fn``, ``state_dict``), so one can
replace ``PrivacyEngine.accountant``. All numbers come from dpml's Rust accountants; the
neighbouring relation is add/remove one record.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from .events import (
    ComposedDpEvent,
    DpEvent,
    EpsilonDeltaDpEvent,
    GaussianDpEvent,
    LaplaceDpEvent,
    PoissonSampledDpEvent,
    RandomizedResponse,
    RepeatAndSelectDpEvent,
    SelfComposedDpEvent,
    dp_sgd_event,
    event_from_dict,
)

__all__ = [
    "RDPAccountant",
    "PLDAccountant",
    "GDPAccountant",
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
    "epsilon",
    "delta",
    "pld_epsilon_bounds",
    "calibrate",
    "steps_for_epochs",
    "tradeoff",
    "alpha_grid",
    "MAX_ALPHA_GRID",
    "ACCOUNTANTS",
]

#: Accountant names: pessimistic PLD (upper bound), optimistic PLD (lower bound), RDP (upper
#: bound) and GDP (a central-limit approximation that can underestimate epsilon).
ACCOUNTANTS = ("pld", "pld_lower", "rdp", "gdp")

EventLike = Union[DpEvent, Dict[str, Any]]


def _json(event: EventLike) -> str:
    if isinstance(event, DpEvent):
        return event.to_json()
    if isinstance(event, dict):
        return event_from_dict(event).to_json()
    raise ValueError(f"event must be a DpEvent or a dict, got {type(event).__name__}")


def epsilon(event: EventLike, delta: float, accountant: str = "pld") -> float:
    """Epsilon such that ``event`` is (epsilon, delta)-DP under ``accountant``.

    ``"pld"`` reports what ``dpml account`` reports (the pessimistic PLD, or the RDP bound below
    the PLD's delta floor).
    """
    return _native.epsilon(_json(event), float(delta), accountant)


def delta(event: EventLike, epsilon: float, accountant: str = "pld") -> float:
    """Delta such that ``event`` is (epsilon, delta)-DP under ``accountant``."""
    return _native.delta(_json(event), float(epsilon), accountant)


def pld_epsilon_bounds(event: EventLike, delta: float) -> Tuple[float, float]:
    """``(lower, upper)`` bounds on the true epsilon from the optimistic and pessimistic PLD."""
    return _native.pld_epsilon_bounds(_json(event), float(delta))


def steps_for_epochs(epochs: float, batch_size: int, dataset_size: int) -> Tuple[float, int]:
    """``(sample_rate, steps)`` of ``epochs`` epochs of batches of ``batch_size`` out of
    ``dataset_size`` records (whole epochs in exact integers, as the CLI counts them)."""
    return _native.steps_for_epochs(float(epochs), int(batch_size), int(dataset_size))


def calibrate(
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    epochs: Optional[float] = None,
    steps: Optional[int] = None,
    accountant: str = "rdp",
) -> float:
    """The smallest noise multiplier for which DP-SGD with ``sample_rate`` for ``steps`` steps
    (or ``epochs`` epochs, ``ceil(epochs / sample_rate)`` steps) is (target_epsilon,
    target_delta)-DP: the signature of Opacus's ``get_noise_multiplier``."""
    if (epochs is None) == (steps is None):
        raise ValueError("give exactly one of epochs and steps")
    if steps is None:
        if not (sample_rate > 0 and epochs is not None and epochs > 0):
            raise ValueError(f"epochs must be > 0, got {epochs}")
        steps = math.ceil(epochs / sample_rate)
    sigma, _ = _native.calibrate(
        float(target_epsilon), float(target_delta), float(sample_rate), int(steps), accountant
    )
    return sigma


#: The most points :func:`alpha_grid` lays out (80 MB): a plot needs a few hundred, and a
#: mistyped size such as ``2**31`` would otherwise fill the memory for minutes.
MAX_ALPHA_GRID = 10**7


def alpha_grid(n: int = 200) -> np.ndarray:
    """``n`` type I errors log-spaced from 1e-6 to 1 (for log-log ROC plots); ``n`` at most
    :data:`MAX_ALPHA_GRID`."""
    n = int(n)
    if not 0 <= n <= MAX_ALPHA_GRID:
        raise ValueError(f"n must be between 0 and {MAX_ALPHA_GRID}, got {n}")
    return _native.alpha_grid(n)


def tradeoff(
    event: EventLike, alphas: Optional[Sequence[float]] = None, accountant: str = "pld"
) -> Tuple[np.ndarray, np.ndarray]:
    """The f-DP trade-off curve of ``event``: ``(alpha, beta)`` arrays where beta is the
    smallest type II error any test can reach at type I error alpha (Dong, Roth, Su 2019)."""
    a = alpha_grid() if alphas is None else np.ascontiguousarray(alphas, dtype=np.float64)
    return a, _native.tradeoff(_json(event), a, accountant)


class _Accountant:
    """Opacus's accountant interface over one dpml accountant."""

    _name = ""

    def __init__(self) -> None:
        #: Steps as ``(noise_multiplier, sample_rate, num_steps)``, consecutive identical
        #: steps merged (as Opacus keeps them).
        self.history: List[Tuple[float, float, int]] = []

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Records one DP-SGD step."""
        if self.history and self.history[-1][:2] == (noise_multiplier, sample_rate):
            nm, sr, n = self.history[-1]
            self.history[-1] = (nm, sr, n + 1)
        else:
            self.history.append((noise_multiplier, sample_rate, 1))

    def event(self) -> DpEvent:
        """The privacy event of every step so far."""
        return ComposedDpEvent([dp_sgd_event(nm, sr, n) for nm, sr, n in self.history])

    def get_epsilon(self, delta: float, **kwargs: Any) -> float:
        """Epsilon of the steps so far at ``delta`` (0 before any step). Opacus's extra keyword
        arguments (``alphas``, ``eps_error``, ...) are accepted and ignored."""
        if not self.history:
            return 0.0
        return epsilon(self.event(), delta, self._name)

    def __len__(self) -> int:
        return len(self.history)

    @classmethod
    def mechanism(cls) -> str:
        """The accountant's name (``"rdp"``, ``"pld"`` or ``"gdp"``)."""
        return cls._name

    def get_optimizer_hook_fn(
        self, sample_rate: float, noise_multiplier: Optional[float] = None
    ) -> Callable[[Any], None]:
        """The hook Opacus attaches to a ``DPOptimizer``: one step per optimizer step."""

        def hook_fn(optim: Any) -> None:
            self.step(
                noise_multiplier=optim.noise_multiplier,
                sample_rate=sample_rate * getattr(optim, "accumulated_iterations", 1),
            )

        return hook_fn

    def state_dict(self, destination: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """The history, as Opacus saves it."""
        out = {} if destination is None else destination
        out["history"] = list(self.history)
        out["mechanism"] = self._name
        return out

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restores a history saved by :meth:`state_dict`."""
        self.history = [tuple(h) for h in state_dict["history"]]  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(history={self.history!r})"


class RDPAccountant(_Accountant):
    """Renyi DP accountant (upper bound; Mironov 2017, with the tighter conversion to
    (epsilon, delta) of Balle et al. 2020)."""

    _name = "rdp"


class PLDAccountant(_Accountant):
    """Privacy loss distribution accountant (pessimistic: an upper bound, tighter than RDP)."""

    _name = "pld"


class GDPAccountant(_Accountant):
    """Gaussian DP accountant (central limit theorem: an approximation that can
    underestimate epsilon)."""

    _name = "gdp"
