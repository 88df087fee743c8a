"""Audit any model from its membership-inference scores (the ML Privacy Meter use case).

The metrics and the empirical epsilon lower bound are those of ``dpml audit`` (and ``dpml
audit --scores``): the threshold is chosen on a random half of the scores and the
Clopper-Pearson bound measured on the other half.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from . import _native
from .accounting import _Accountant, alpha_grid, tradeoff
from .events import DpEvent

__all__ = ["AuditResult", "audit_scores", "lira", "one_run", "one_run_bound", "fdp_bound"]


def _scores(name: str, a: Any) -> np.ndarray:
    arr = np.ascontiguousarray(a, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


@dataclass
class AuditResult:
    """What a threshold attack achieved; the names are those of the CLI's ``audit.json``."""

    #: False-positive rates of the ROC's upper envelope (increasing).
    fpr: np.ndarray
    #: True-positive rates at ``fpr``.
    tpr: np.ndarray
    #: Area under the ROC curve.
    auc: float
    #: TPR at FPR 1%, 0.1% and 0 (keys ``"0.01"``, ``"0.001"``, ``"0"``).
    tpr_at_fpr: Dict[str, float]
    #: Whether each FPR target is resolvable with this many non-members.
    fpr_resolvable: Dict[str, bool]
    #: Attacker advantage max(TPR - FPR).
    advantage: float
    #: Epsilon lower bound holding with probability ``confidence``.
    epsilon_lower_bound: float
    #: The plug-in epsilon of the chosen threshold (an estimate, not a bound).
    epsilon_estimate: float
    #: Number of member scores.
    members: int
    #: Number of non-member scores.
    non_members: int
    #: Delta of the bound.
    delta: float
    #: Confidence of the bound.
    confidence: float
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """The result as the CLI's JSON (without the ROC arrays)."""
        return {
            "auc": self.auc,
            "tpr_at_fpr": dict(self.tpr_at_fpr),
            "fpr_resolvable": dict(self.fpr_resolvable),
            "advantage": self.advantage,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "epsilon_estimate": self.epsilon_estimate,
            "members": self.members,
            "non_members": self.non_members,
        }


def audit_scores(
    member_scores: Any,
    nonmember_scores: Any,
    delta: float = 1e-5,
    confidence: float = 0.95,
    seed: Optional[int] = None,
) -> AuditResult:
    """ROC, AUC, TPR at low FPR, advantage and an empirical epsilon lower bound from scores
    where higher means "member". ``seed`` makes the random half-split reproducible."""
    m = _scores("member_scores", member_scores)
    n = _scores("nonmember_scores", nonmember_scores)
    text, (fpr, tpr) = _native.audit_scores(m, n, float(delta), float(confidence), seed)
    d = json.loads(text)
    return AuditResult(
        fpr=fpr,
        tpr=tpr,
        auc=d["auc"],
        tpr_at_fpr=d["tpr_at_fpr"],
        fpr_resolvable=d["fpr_resolvable"],
        advantage=d["advantage"],
        epsilon_lower_bound=d["epsilon_lower_bound"],
        epsilon_estimate=d["epsilon_estimate"],
        members=d["members"],
        non_members=d["non_members"],
        delta=float(delta),
        confidence=float(confidence),
    )


def lira(
    target_logits: Any,
    reference_logits: Any,
    reference_in_mask: Any,
    labels: Any,
    online: bool = True,
    per_example_variance: bool = False,
) -> np.ndarray:
    """LiRA membership scores (Carlini et al. 2022; higher = member) for ``n`` records.

    ``target_logits`` is ``[n, classes]``, ``reference_logits`` ``[K, n, classes]`` and
    ``reference_in_mask`` ``[K, n]`` (whether reference model k trained on record i);
    ``labels`` the ``n`` true labels. ``online=False`` uses only the OUT models."""
    t = np.ascontiguousarray(target_logits, dtype=np.float64)
    r = np.ascontiguousarray(reference_logits, dtype=np.float64)
    mask = np.ascontiguousarray(reference_in_mask, dtype=np.bool_)
    y = np.ascontiguousarray(labels, dtype=np.int64)
    if t.ndim != 2 or r.ndim != 3 or mask.ndim != 2 or y.ndim != 1:
        raise ValueError(
            "target_logits must be [n, classes], reference_logits [K, n, classes], "
            f"reference_in_mask [K, n] and labels [n]; got shapes {t.shape}, {r.shape}, "
            f"{mask.shape}, {y.shape}"
        )
    if r.shape[1:] != t.shape or mask.shape[1] != t.shape[0] or y.shape[0] != t.shape[0]:
        raise ValueError(
            f"shapes do not match: target_logits {t.shape}, reference_logits {r.shape}, "
            f"reference_in_mask {mask.shape}, labels {y.shape}"
        )
    return _native.lira(t, r, mask, y, online, per_example_variance)


def one_run(
    scores: Any,
    included: Any,
    k_plus: int,
    k_minus: int,
    delta: float = 1e-5,
    confidence: float = 0.95,
) -> Dict[str, Any]:
    """The one-run audit (Steinke, Nasr, Jagielski 2023): guess "in" for the ``k_plus``
    highest canary scores and "out" for the ``k_minus`` lowest, then bound epsilon."""
    s = _scores("scores", scores)
    inc = np.ascontiguousarray(included, dtype=np.bool_)
    text = _native.one_run_audit(s, inc, int(k_plus), int(k_minus), float(delta), float(confidence))
    return json.loads(text)


def one_run_bound(
    canaries: int, guesses: int, correct: int, delta: float = 1e-5, confidence: float = 0.95
) -> float:
    """The one-run epsilon lower bound from counts: ``correct`` of ``guesses`` guesses on
    ``canaries`` canaries."""
    return _native.one_run_bound(
        int(canaries), int(guesses), int(correct), float(delta), float(confidence)
    )


def fdp_bound(
    accountant: Union[_Accountant, DpEvent], fpr: Optional[Any] = None
) -> Tuple[np.ndarray, np.ndarray]:
    """The largest TPR any membership attack can reach at each FPR against a model with this
    accountant's steps (or this event): ``(fpr, tpr)`` arrays for the same ROC plot as an
    :class:`AuditResult`. Uses the pessimistic PLD (GDP for a ``GDPAccountant``)."""
    if isinstance(accountant, _Accountant):
        event = accountant.event()
        name = "gdp" if accountant.mechanism() == "gdp" else "pld"
    elif isinstance(accountant, DpEvent):
        event, name = accountant, "pld"
    else:
        raise ValueError(
            f"accountant must be a dpml accountant or a DpEvent, got {type(accountant).__name__}"
        )
    alphas = alpha_grid() if fpr is None else fpr
    a, beta = tradeoff(event, alphas, name)
    return a, 1.0 - beta
