"""Privacy accounting: Opacus-style accountants, events, calibration and f-DP curves.

The accountants have the interface of Opacus's ``IAccountant`` (``step``, ``get_epsilon``,
``history``, ``len()``, ``mechanism()``, ``get_optimizer_hook_fn``, ``state_dict``), so one can
replace ``PrivacyEngine.accountant``; :class:`RDPAccountant` also has Opacus's
``get_privacy_spent``. Opacus's keyword ``sample_rate`` is accepted beside dpml's
``sampling_rate``. Every function taking an event also takes dp_accounting's own ``DpEvent``
objects. All numbers come from dpml's Rust accountants (the ones ``dpml account`` runs); the
neighbouring relation is add/remove one record.
"""

from __future__ import annotations

import json
import math
from collections import abc
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._args import count, number, real, shown, whole
from . import events as _events
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
    from_dp_accounting,
    to_event,
)

__all__ = [
    "RDPAccountant",
    "PLDAccountant",
    "GDPAccountant",
    # The events, re-exported (dp_accounting keeps them beside its accountants too).
    *_events.__all__,
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


def __dir__() -> List[str]:
    return sorted(__all__)


#: Accountant names: pessimistic PLD (upper bound), optimistic PLD (lower bound), RDP (upper
#: bound) and GDP (a central-limit approximation that can underestimate epsilon).
ACCOUNTANTS = ("pld", "pld_lower", "rdp", "gdp")

EventLike = Union[DpEvent, Dict[str, Any], Any]


def _json(event: EventLike) -> str:
    return to_event(event).to_json()


def _rate(sampling_rate: Optional[float], sample_rate: Optional[float]) -> float:
    """The sampling rate given under dpml's name or Opacus's (not both)."""
    if sampling_rate is not None and sample_rate is not None:
        raise ValueError("give one of sampling_rate and sample_rate (Opacus's name), not both")
    name = "sampling_rate" if sampling_rate is not None else "sample_rate"
    rate = sampling_rate if sampling_rate is not None else sample_rate
    if rate is None:
        raise ValueError("sampling_rate is required")
    q = number(rate, name)
    if not 0 < q <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {rate!r}")
    return q


def epsilon(event: EventLike, delta: float, accountant: str = "pld") -> float:
    """Epsilon such that ``event`` is (epsilon, delta)-DP.

    Parameters
    ----------
    event : DpEvent, dict or dp_accounting.DpEvent
        What was released.
    delta : float
        Delta in (0, 1).
    accountant : str, default "pld"
        One of :data:`ACCOUNTANTS`. ``"pld"`` reports what ``dpml account`` reports (the
        pessimistic PLD, or the RDP bound below the PLD's delta floor).

    Returns
    -------
    float
        Epsilon.

    Raises
    ------
    ValueError
        For a bad event, delta or accountant name.
    """
    return _native.epsilon(_json(event), number(delta, "delta"), accountant)


def delta(event: EventLike, epsilon: float, accountant: str = "pld") -> float:
    """Delta such that ``event`` is (epsilon, delta)-DP.

    Parameters
    ----------
    event : DpEvent, dict or dp_accounting.DpEvent
        What was released.
    epsilon : float
        Epsilon >= 0.
    accountant : str, default "pld"
        One of :data:`ACCOUNTANTS`.

    Returns
    -------
    float
        Delta.
    """
    return _native.delta(_json(event), number(epsilon, "epsilon"), accountant)


def pld_epsilon_bounds(event: EventLike, delta: float) -> Tuple[float, float]:
    """Lower and upper bounds on the true epsilon, from the optimistic and pessimistic PLD.

    Parameters
    ----------
    event : DpEvent, dict or dp_accounting.DpEvent
        What was released.
    delta : float
        Delta in (0, 1).

    Returns
    -------
    (float, float)
        ``(lower, upper)``: the gap is the accountant's own error bar.
    """
    return _native.pld_epsilon_bounds(_json(event), number(delta, "delta"))


def steps_for_epochs(epochs: float, batch_size: int, dataset_size: int) -> Tuple[float, int]:
    """The DP-SGD schedule of ``epochs`` epochs of batches of ``batch_size`` out of
    ``dataset_size`` records, counted as ``dpml train`` counts it.

    Parameters
    ----------
    epochs : float
        Epochs E.
    batch_size : int
        Expected batch size B.
    dataset_size : int
        Training-set size N.

    Returns
    -------
    (float, int)
        ``(sampling_rate, steps)``: q = B/N and T = ceil(E*N/B) in exact integers.
    """
    return _native.steps_for_epochs(
        float(epochs), whole(batch_size, "batch_size"), whole(dataset_size, "dataset_size")
    )


def calibrate(
    target_epsilon: float,
    target_delta: float,
    sampling_rate: Optional[float] = None,
    epochs: Optional[float] = None,
    steps: Optional[int] = None,
    accountant: Optional[str] = None,
    *,
    sample_rate: Optional[float] = None,
    **kwargs: Any,
) -> float:
    """The smallest noise multiplier for which DP-SGD reaches (target_epsilon, target_delta).

    The signature of Opacus's ``get_noise_multiplier``; the number of ``dpml calibrate``.

    Parameters
    ----------
    target_epsilon : float
        The epsilon not to exceed.
    target_delta : float
        Delta of the guarantee.
    sampling_rate : float
        Poisson sampling rate q (``sample_rate`` is Opacus's name for it).
    epochs : float, optional
        Epochs: ``ceil(epochs / sampling_rate)`` steps. Give ``epochs`` or ``steps``.
    steps : int, optional
        Steps T.
    accountant : str, optional
        ``"pld"`` or ``"rdp"`` (upper bounds only). Default: dpml's, the tight
        ``"{accountant}"``, the same as ``dpml calibrate``'s.
    sample_rate : float, optional
        Opacus's name for ``sampling_rate``.
    **kwargs
        Opacus's other keywords (``epsilon_tolerance``) are accepted and ignored: the
        search's tolerance is dpml's.

    Returns
    -------
    float
        sigma; the epsilon it reaches is at most ``target_epsilon``.

    Raises
    ------
    ValueError
        For bad parameters or a target no sigma reaches.
    """
    rate = _rate(sampling_rate, sample_rate)
    if (epochs is None) == (steps is None):
        raise ValueError("give exactly one of epochs and steps")
    if steps is None:
        e = number(epochs, "epochs")
        if not (math.isfinite(e) and e > 0):
            raise ValueError(f"epochs must be finite and > 0, got {epochs!r}")
        if not e / rate < 2**64:
            raise ValueError(
                f"epochs / sampling_rate must be fewer than 2**64 steps, got {epochs!r} / {rate!r}"
            )
        steps = math.ceil(e / rate)
    result = json.loads(
        _native.calibrate(
            float(target_epsilon), float(target_delta), rate, count(steps, "steps"), accountant
        )
    )
    return float(result["noise_multiplier"])


calibrate.__doc__ = (calibrate.__doc__ or "").replace(
    '"{accountant}"', '"' + json.loads(_native.defaults())["calibration_accountant"] + '"'
)

#: The most points :func:`alpha_grid` lays out (80 MB): a plot needs a few hundred, and a
#: mistyped size such as ``2**31`` would otherwise fill the memory for minutes.
MAX_ALPHA_GRID = 10**7


def alpha_grid(n: int = 200) -> np.ndarray:
    """Type I errors log-spaced from 1e-6 to 1, for log-log ROC plots.

    Parameters
    ----------
    n : int, default 200
        Number of points, at most :data:`MAX_ALPHA_GRID`.

    Returns
    -------
    ndarray of shape (n,)
        The grid.
    """
    n = whole(n, "n")
    if not 0 <= n <= MAX_ALPHA_GRID:
        raise ValueError(f"n must be between 0 and {MAX_ALPHA_GRID}, got {n}")
    return _native.alpha_grid(n)


def _rates(values: Any, name: str) -> np.ndarray:
    """``values`` as a one-dimensional array of rates in [0, 1] (type I errors, FPRs); one
    number is taken as an array of one."""
    try:
        arr = np.array(real(values, name), dtype=np.float64, ndmin=1)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a one-dimensional array of numbers in [0, 1], got {shown(values)}"
        ) from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a one-dimensional array, got shape {arr.shape}")
    bad = arr[~((arr >= 0) & (arr <= 1))]
    if bad.size:
        raise ValueError(f"{name} must be in [0, 1], got {bad[0]}")
    return arr


def tradeoff(
    event: EventLike,
    alphas: Optional[Union[Sequence[float], np.ndarray]] = None,
    accountant: str = "pld",
) -> Tuple[np.ndarray, np.ndarray]:
    """The f-DP trade-off curve of ``event`` (Dong, Roth, Su 2019).

    Parameters
    ----------
    event : DpEvent, dict or dp_accounting.DpEvent
        What was released.
    alphas : sequence of float, optional
        Type I errors (default :func:`alpha_grid`).
    accountant : str, default "pld"
        One of :data:`ACCOUNTANTS`.

    Returns
    -------
    (ndarray, ndarray)
        ``(alpha, beta)``: beta is the smallest type II error any test can reach at type I
        error alpha.
    """
    a = alpha_grid() if alphas is None else _rates(alphas, "alphas")
    return a, _native.tradeoff(_json(event), a, accountant)


def _checked_step(noise_multiplier: Any, sampling_rate: Any) -> Tuple[float, float]:
    """A DP-SGD step's (noise multiplier, sampling rate), refused here, where the bad value
    is passed (a step or a restored history), not at the next ``get_epsilon``."""
    for name, value in [("noise_multiplier", noise_multiplier), ("sampling_rate", sampling_rate)]:
        if isinstance(value, (bool, np.bool_, str, bytes)):
            raise ValueError(f"{name} must be a number, got {value!r}")
    nm, rate = float(noise_multiplier), float(sampling_rate)
    if not (math.isfinite(nm) and nm > 0):
        raise ValueError(f"noise_multiplier must be finite and > 0, got {noise_multiplier}")
    if not 0 < rate <= 1:
        raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate}")
    return nm, rate


class _Accountant:
    """Opacus's accountant interface over one dpml accountant."""

    _name = ""

    def __init__(self) -> None:
        #: Steps as ``(noise_multiplier, sampling_rate, num_steps)``, consecutive identical
        #: steps merged (as Opacus keeps them).
        self.history: List[Tuple[float, float, int]] = []

    def step(
        self,
        *,
        noise_multiplier: float,
        sampling_rate: Optional[float] = None,
        sample_rate: Optional[float] = None,
    ) -> None:
        """Records one DP-SGD step.

        Parameters
        ----------
        noise_multiplier : float
            sigma / C of the step.
        sampling_rate : float
            Its Poisson sampling rate (``sample_rate`` is Opacus's name).
        sample_rate : float, optional
            Opacus's name for ``sampling_rate``.

        Raises
        ------
        ValueError
            For a noise multiplier or sampling rate out of range.
        """
        step = _checked_step(noise_multiplier, _rate(sampling_rate, sample_rate))
        if self.history and self.history[-1][:2] == step:
            nm, sr, n = self.history[-1]
            self.history[-1] = (nm, sr, n + 1)
        else:
            self.history.append((step[0], step[1], 1))

    def event(self) -> DpEvent:
        """The privacy event of every step so far.

        Returns
        -------
        DpEvent
            The composition of the recorded steps.
        """
        return ComposedDpEvent([dp_sgd_event(nm, sr, n) for nm, sr, n in self.history])

    def get_epsilon(self, delta: float, **kwargs: Any) -> float:
        """Epsilon of the steps so far.

        Parameters
        ----------
        delta : float
            Delta in (0, 1).
        **kwargs
            Opacus's extra keywords (``alphas``, ``eps_error``, ...), accepted and ignored.

        Returns
        -------
        float
            Epsilon (0 before any step).

        Raises
        ------
        ValueError
            For delta outside (0, 1), before any step too.
        """
        if not self.history:
            # Nothing spent, but a bad delta is refused by the accountants all the same.
            return epsilon(EpsilonDeltaDpEvent(0.0, 0.0), delta, "pld")
        return epsilon(self.event(), delta, self._name)

    def __len__(self) -> int:
        return len(self.history)

    @classmethod
    def mechanism(cls) -> str:
        """The accountant's name.

        Returns
        -------
        str
            ``"rdp"``, ``"pld"`` or ``"gdp"``.
        """
        return cls._name

    def get_optimizer_hook_fn(
        self,
        sampling_rate: Optional[float] = None,
        noise_multiplier: Optional[float] = None,
        *,
        sample_rate: Optional[float] = None,
    ) -> Callable[[Any], None]:
        """The hook Opacus attaches to a ``DPOptimizer``: one step per optimizer step.

        Parameters
        ----------
        sampling_rate : float
            Poisson sampling rate (``sample_rate`` is Opacus's name).
        noise_multiplier : float, optional
            Unused: the optimizer's own is read at each step (as Opacus does).
        sample_rate : float, optional
            Opacus's name for ``sampling_rate``.

        Returns
        -------
        callable
            ``hook(optimizer)``.
        """
        rate = _rate(sampling_rate, sample_rate)

        def hook_fn(optim: Any) -> None:
            self.step(
                noise_multiplier=optim.noise_multiplier,
                sampling_rate=rate * getattr(optim, "accumulated_iterations", 1),
            )

        return hook_fn

    def state_dict(self, destination: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """The history, as Opacus saves it.

        Parameters
        ----------
        destination : dict, optional
            A dict to fill.

        Returns
        -------
        dict
            ``{"history": [...], "mechanism": name}``.
        """
        out = {} if destination is None else destination
        out["history"] = list(self.history)
        out["mechanism"] = self._name
        return out

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restores a history saved by :meth:`state_dict`.

        Parameters
        ----------
        state_dict : dict
            What :meth:`state_dict` returned.
        """
        # Checked here, as a step is: a malformed history would otherwise fail later with
        # an IndexError, or keep a stray field unnoticed.
        if not isinstance(state_dict, abc.Mapping):
            raise ValueError(f"state_dict must be a dict with a 'history', got {state_dict!r}")
        if "history" not in state_dict:
            raise ValueError(f"state_dict has no 'history', got keys {list(state_dict)}")
        entries = state_dict["history"]
        if isinstance(entries, (str, bytes, abc.Mapping)) or not isinstance(entries, abc.Iterable):
            raise ValueError(f"state_dict['history'] must be a list of steps, got {entries!r}")
        history = []
        for h in entries:
            if isinstance(h, (str, bytes)) or not isinstance(h, abc.Sequence) or len(h) != 3:
                raise ValueError(
                    "a history entry must be (noise_multiplier, sampling_rate, steps), "
                    f"got {h!r}"
                )
            noise_multiplier, sampling_rate = _checked_step(h[0], h[1])
            steps = whole(h[2], "a history entry's number of steps")
            if not 1 <= steps < 2**64:
                raise ValueError(
                    f"a history entry's number of steps must be in [1, 2**64), got {steps}"
                )
            history.append((noise_multiplier, sampling_rate, steps))
        self.history = history

    def __repr__(self) -> str:
        return f"{type(self).__name__}(history={self.history!r})"


class RDPAccountant(_Accountant):
    """Renyi DP accountant (an upper bound; Mironov 2017, with the tighter conversion to
    (epsilon, delta) of Balle et al. 2020).

    Examples
    --------
    >>> from dpml.accounting import RDPAccountant
    >>> acc = RDPAccountant()
    >>> acc.step(noise_multiplier=1.1, sample_rate=0.01)
    >>> eps, order = acc.get_privacy_spent(delta=1e-5)
    """

    _name = "rdp"

    def get_privacy_spent(
        self, *, delta: float, alphas: Optional[Sequence[float]] = None
    ) -> Tuple[float, float]:
        """Epsilon and the Renyi order that gives it, as Opacus's ``get_privacy_spent``.

        Parameters
        ----------
        delta : float
            Delta in (0, 1).
        alphas : sequence of float, optional
            Accepted for Opacus; dpml's own grid of orders is searched.

        Returns
        -------
        (float, float)
            ``(epsilon, best_alpha)``.
        """
        event = self.event() if self.history else EpsilonDeltaDpEvent(0.0, 0.0)
        return _native.rdp_epsilon_and_order(event.to_json(), number(delta, "delta"))


class PLDAccountant(_Accountant):
    """Privacy loss distribution accountant (pessimistic: an upper bound, tighter than RDP).

    Examples
    --------
    >>> from dpml.accounting import PLDAccountant
    >>> acc = PLDAccountant()
    >>> for _ in range(1000):
    ...     acc.step(noise_multiplier=1.1, sampling_rate=0.01)
    >>> acc.get_epsilon(delta=1e-5) < 2
    True
    """

    _name = "pld"


class GDPAccountant(_Accountant):
    """Gaussian DP accountant (central limit theorem: an approximation that can
    underestimate epsilon)."""

    _name = "gdp"
