"""Audit any model from its membership-inference scores (the ML Privacy Meter use case).

The metrics and the empirical epsilon lower bound are those of ``dpml audit`` (and ``dpml
audit --scores``): the threshold is chosen on a random half of the scores and the
Clopper-Pearson bound measured on the other half.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _native
from ._args import count
from ._args import seed as _seed
from .accounting import _Accountant, _rates, alpha_grid, tradeoff
from .events import DpEvent, to_event

__all__ = [
    "AuditResult",
    "FprTable",
    "audit_scores",
    "lira",
    "one_run",
    "one_run_bound",
    "fdp_bound",
]


def __dir__() -> List[str]:
    return sorted(__all__)


def _scores(name: str, a: Any) -> np.ndarray:
    arr = np.ascontiguousarray(a, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


class FprTable(Dict[float, Any]):
    """A table keyed by false-positive rate: ``t[0.01]``; the command line's text keys
    (``t["0.01"]``) are read too.

    Parameters
    ----------
    items : dict
        Rates (numbers or the command line's text) and their values.
    """

    def __init__(self, items: Dict[Any, Any]) -> None:
        super().__init__((float(k), v) for k, v in items.items())

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(float(key))

    def __contains__(self, key: object) -> bool:
        try:
            return super().__contains__(float(key))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def to_json(self) -> Dict[str, Any]:
        """The table with the command line's text keys (``"0.01"``, ``"0.001"``, ``"0"``)."""
        return {_fpr_text(k): v for k, v in self.items()}


def _fpr_text(fpr: float) -> str:
    return "0" if fpr == 0 else repr(fpr)


@dataclass
class AuditResult:
    """What a threshold attack achieved; the names are those of the CLI's ``audit.json``.

    Attributes
    ----------
    fpr, tpr : ndarray
        The ROC's upper envelope: false-positive rates (increasing) and true-positive rates.
    auc : float
        Area under the ROC curve.
    tpr_at_fpr : FprTable
        TPR at FPR 1%, 0.1% and 0, keyed by the rate: ``tpr_at_fpr[0.001]``.
    fpr_resolvable : FprTable
        Whether each FPR target is resolvable with this many non-members.
    advantage : float
        Attacker advantage max(TPR - FPR).
    epsilon_lower_bound : float
        Epsilon lower bound holding with probability ``confidence``.
    epsilon_estimate : float
        The plug-in epsilon of the chosen threshold (an estimate, not a bound).
    members, non_members : int
        Numbers of member and non-member scores.
    delta, confidence : float
        Delta and confidence of the bound.
    extra : dict
        Further fields, when there are any.
    """

    fpr: np.ndarray
    tpr: np.ndarray
    auc: float
    tpr_at_fpr: FprTable
    fpr_resolvable: FprTable
    advantage: float
    epsilon_lower_bound: float
    epsilon_estimate: float
    members: int
    non_members: int
    delta: float
    confidence: float
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """The result as the CLI's JSON (without the ROC arrays).

        Returns
        -------
        dict
            The CLI's field names and text keys.
        """
        return {
            "auc": self.auc,
            "tpr_at_fpr": self.tpr_at_fpr.to_json(),
            "fpr_resolvable": self.fpr_resolvable.to_json(),
            "advantage": self.advantage,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "epsilon_estimate": self.epsilon_estimate,
            "members": self.members,
            "non_members": self.non_members,
        }


def _looks_like_labels(a: np.ndarray) -> bool:
    """Only 0s and 1s, both present: membership labels, not an attack's scores."""
    values = np.unique(a)
    return values.size == 2 and bool(np.all(values == np.array([0.0, 1.0])))


def audit_scores(
    member_scores: Any = None,
    nonmember_scores: Any = None,
    *,
    scores: Any = None,
    labels: Any = None,
    delta: float = 1e-5,
    confidence: float = 0.95,
    seed: Optional[int] = None,
) -> AuditResult:
    """Audit any model from its membership scores (higher means "member"), as ``dpml audit
    --scores`` does.

    Give the members' and non-members' scores, or (scikit-learn's habit) ``scores=`` and
    ``labels=`` (1 for a member, 0 for a non-member) by keyword. A positional argument that
    holds only 0s and 1s is refused: it looks like labels where scores belong, and would
    report a leak that is not there.

    Parameters
    ----------
    member_scores : array-like of shape (m,)
        Scores of records the model trained on.
    nonmember_scores : array-like of shape (n,)
        Scores of records it did not.
    scores : array-like of shape (m + n,), keyword-only
        Every record's score (with ``labels``).
    labels : array-like of shape (m + n,), keyword-only
        1 for a member, 0 for a non-member.
    delta : float, default 1e-5
        Delta of the epsilon lower bound.
    confidence : float, default 0.95
        Confidence of the bound.
    seed : int, optional
        Makes the random half-split (threshold chosen on one half, bound measured on the
        other) reproducible.

    Returns
    -------
    AuditResult
        ROC, AUC, TPR at low FPR, advantage and the empirical epsilon lower bound.

    Raises
    ------
    ValueError
        For scores that are not finite, empty sides, labels that are not 0/1, an argument
        that looks like labels, or both forms at once.

    Examples
    --------
    >>> import numpy as np
    >>> from dpml.audit import audit_scores
    >>> rng = np.random.default_rng(0)
    >>> r = audit_scores(rng.normal(1, 1, 500), rng.normal(0, 1, 500), seed=1)
    >>> 0.5 < r.auc < 1.0
    True
    """
    if scores is not None or labels is not None:
        if member_scores is not None or nonmember_scores is not None:
            raise ValueError(
                "give member_scores and nonmember_scores, or scores= and labels=, not both"
            )
        if scores is None or labels is None:
            raise ValueError("scores= and labels= go together")
        s = _scores("scores", scores)
        y = np.asarray(labels)
        if y.shape != s.shape:
            raise ValueError(f"labels must have one value per score ({s.shape}), got {y.shape}")
        if not np.all((y == 0) | (y == 1)):
            raise ValueError("labels must be 1 (member) or 0 (non-member)")
        m, n = s[y == 1], s[y == 0]
    else:
        if member_scores is None or nonmember_scores is None:
            raise ValueError("member_scores and nonmember_scores are required")
        m = _scores("member_scores", member_scores)
        n = _scores("nonmember_scores", nonmember_scores)
        for name, a in (("member_scores", m), ("nonmember_scores", n)):
            if _looks_like_labels(a):
                raise ValueError(
                    f"{name} holds only 0s and 1s: it looks like membership labels, not "
                    "scores; for scores with labels call audit_scores(scores=..., labels=...)"
                )
    text, (fpr, tpr) = _native.audit_scores(
        np.ascontiguousarray(m),
        np.ascontiguousarray(n),
        float(delta),
        float(confidence),
        _seed(seed),
    )
    d = json.loads(text)
    return AuditResult(
        fpr=fpr,
        tpr=tpr,
        auc=d["auc"],
        tpr_at_fpr=FprTable(d["tpr_at_fpr"]),
        fpr_resolvable=FprTable(d["fpr_resolvable"]),
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
    """LiRA membership scores (Carlini et al. 2022; higher means member).

    Parameters
    ----------
    target_logits : array-like of shape (n, classes)
        The audited model's logits on the n records.
    reference_logits : array-like of shape (K, n, classes)
        The K reference models' logits on the same records.
    reference_in_mask : array-like of bool, shape (K, n)
        Whether reference model k trained on record i.
    labels : array-like of int, shape (n,)
        The records' true labels.
    online : bool, default True
        Use the IN and OUT models (``False``: only the OUT models, offline LiRA).
    per_example_variance : bool, default False
        Fit one variance per record instead of a global one.

    Returns
    -------
    ndarray of shape (n,)
        One score per record, for :func:`audit_scores`.
    """
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
    """The one-run audit (Steinke, Nasr, Jagielski 2023) from canary scores.

    Guesses "in" for the ``k_plus`` highest canary scores and "out" for the ``k_minus``
    lowest, then bounds epsilon from the correct guesses.

    Parameters
    ----------
    scores : array-like of shape (m,)
        Each canary's score (higher means included).
    included : array-like of bool, shape (m,)
        Whether each canary was in the training set.
    k_plus, k_minus : int
        Numbers of "in" and "out" guesses.
    delta : float, default 1e-5
        Delta of the bound.
    confidence : float, default 0.95
        Confidence of the bound.

    Returns
    -------
    dict
        The guesses, correct guesses and the epsilon lower bound (``"epsilon"``).
    """
    s = _scores("scores", scores)
    inc = np.ascontiguousarray(included, dtype=np.bool_)
    text = _native.one_run_audit(
        s,
        inc,
        count(k_plus, "k_plus"),
        count(k_minus, "k_minus"),
        float(delta),
        float(confidence),
    )
    return json.loads(text)


def one_run_bound(
    canaries: int, guesses: int, correct: int, delta: float = 1e-5, confidence: float = 0.95
) -> float:
    """The one-run epsilon lower bound from counts.

    Parameters
    ----------
    canaries : int
        Number of canaries m.
    guesses : int
        Guesses made r.
    correct : int
        Correct guesses v.
    delta : float, default 1e-5
        Delta of the bound.
    confidence : float, default 0.95
        Confidence of the bound.

    Returns
    -------
    float
        Epsilon lower bound.
    """
    return _native.one_run_bound(
        count(canaries, "canaries"),
        count(guesses, "guesses"),
        count(correct, "correct"),
        float(delta),
        float(confidence),
    )


def fdp_bound(
    accountant: Union[_Accountant, DpEvent, Any], fpr: Optional[Any] = None
) -> Tuple[np.ndarray, np.ndarray]:
    """The largest TPR any membership attack can reach at each FPR.

    Parameters
    ----------
    accountant : accountant or event
        A dpml accountant (its steps so far), a dpml event or a dp_accounting event.
    fpr : array-like, optional
        False-positive rates (default :func:`dpml.accounting.alpha_grid`).

    Returns
    -------
    (ndarray, ndarray)
        ``(fpr, tpr)`` for the same ROC plot as an :class:`AuditResult`. Uses the pessimistic
        PLD (GDP for a ``GDPAccountant``).
    """
    if isinstance(accountant, _Accountant):
        event = accountant.event()
        name = "gdp" if accountant.mechanism() == "gdp" else "pld"
    else:
        event, name = to_event(accountant), "pld"
    alphas = alpha_grid() if fpr is None else _rates(fpr, "fpr")
    a, beta = tradeoff(event, alphas, name)
    return a, 1.0 - beta
