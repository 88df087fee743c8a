"""A durable privacy budget ledger (the SQLite file of the command line's ``--ledger``)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Union

from . import _native
from .events import DpEvent

__all__ = ["Ledger"]


class Ledger:
    """A budget ledger: every spend is recorded durably before anything is released.

    The file is the one ``dpml ledger create`` makes and ``dpml query --ledger`` charges;
    balances and entries have the command line's field names (``dpml ledger show --json``).

    Parameters
    ----------
    path : str or os.PathLike
        The ledger file. A missing file is created only when ``budget`` is given, so a typo
        in the path never starts a fresh budget.
    budget : float, optional
        Total epsilon budget of a new ledger; an existing ledger keeps its stored budget (a
        different one given is refused).
    budget_delta : float, optional
        Total delta budget of a new ledger (0: a pure-epsilon ledger).

    Raises
    ------
    ValueError
        For a missing ledger without a budget, a different budget, or a corrupt file.

    Examples
    --------
    >>> import dpml, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "budget.db")
    >>> ledger = dpml.Ledger(path, budget=1.0)
    >>> r = dpml.stats.count(np.ones(10), epsilon=0.5, ledger=ledger)
    >>> ledger.balance()["spent"]
    0.5
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        budget: Optional[float] = None,
        budget_delta: Optional[float] = None,
    ) -> None:
        self.path = os.fspath(path)
        self._inner = _native.Ledger(self.path, budget, budget_delta)

    def balance(self) -> Dict[str, Any]:
        """Where the ledger stands.

        Returns
        -------
        dict
            ``spent`` and ``remaining`` epsilon, ``spent_delta`` and ``remaining_delta``, the
            number of ``entries`` and the ``composition`` that produced the totals.
        """
        return json.loads(self._inner.balance_json())

    def entries(self) -> List[Dict[str, Any]]:
        """Every recorded spend, oldest first.

        Returns
        -------
        list of dict
            ``id``, ``time`` (UTC, RFC 3339), ``label``, ``epsilon``, ``delta`` and ``event``.
        """
        return json.loads(self._inner.entries_json())

    def spend(
        self, label: str, event: DpEvent, epsilon: float, delta: float = 0.0
    ) -> Dict[str, Any]:
        """Records a spend (refused over budget, before anything is released).

        Parameters
        ----------
        label : str
            What was released.
        event : DpEvent
            Its privacy event.
        epsilon : float
            Its epsilon by itself.
        delta : float, default 0
            Its delta by itself.

        Returns
        -------
        dict
            The balance after the spend (as :meth:`balance`).
        """
        return json.loads(self._inner.spend(label, event.to_json(), float(epsilon), float(delta)))

    def __repr__(self) -> str:
        return f"Ledger({self.path!r})"
