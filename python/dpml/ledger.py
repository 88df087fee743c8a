"""A durable privacy budget ledger (the SQLite file of the CLI's ``--ledger``)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from . import _native
from .events import DpEvent

__all__ = ["Ledger"]


class Ledger:
    """A budget ledger at ``path``: created with the budget ``(budget, budget_delta)`` when
    missing; an existing ledger keeps its stored budget (a different one given is refused).

    Spends compose with RDP where that is tighter than adding up, as on the command line, and
    a spend over budget raises :class:`ValueError` before any value is returned.
    """

    def __init__(
        self, path: str, budget: Optional[float] = None, budget_delta: Optional[float] = None
    ) -> None:
        self.path = str(path)
        self._inner = _native.Ledger(self.path, budget, budget_delta)

    def balance(self) -> Dict[str, Any]:
        """Spent and remaining epsilon and delta, the number of entries and the composition."""
        return json.loads(self._inner.balance_json())

    def entries(self) -> List[Dict[str, Any]]:
        """Every recorded spend, oldest first."""
        return json.loads(self._inner.entries_json())

    def spend(self, label: str, event: DpEvent, epsilon: float, delta: float = 0.0) -> Dict[str, Any]:
        """Records a spend of ``(epsilon, delta)`` described by ``event``; returns the balance."""
        return json.loads(self._inner.spend(label, event.to_json(), float(epsilon), float(delta)))

    def __repr__(self) -> str:
        return f"Ledger({self.path!r})"
