"""A durable privacy budget ledger (the SQLite file of the CLI's ``--ledger``).

The ledger's JSON uses one name per concept on both fronts: a balance has ``spent``,
``remaining``, ``spent_delta``, ``remaining_delta``, ``entries`` and ``composition``; an entry
has ``id``, ``time`` (RFC 3339, UTC), ``command``, ``dataset``, ``label``, ``event``,
``epsilon``, ``delta``, ``run`` and ``neighbouring``. The names earlier versions of this
package used (``spent_epsilon``, ``remaining_epsilon``, ``time_unix``) still read as aliases.

A ledger adds up epsilon under one neighbouring relation (``neighbouring``: ``"record"``,
``"label"``, ``"features"`` or ``"answer"``), fixed by its first entry: a release under another
(a label-DP fit on a ledger of whole-record releases, say) raises ValueError and records
nothing. ``spend`` records whole-record releases.

Every row of a ledger is sealed with a key kept outside the file: by default the key file
beside it (``path + ".key"``, made with 0600 permissions when the ledger is created), or
``key_file``, or a key derived from ``passphrase`` (default: the ``DPML_LEDGER_PASSPHRASE``
environment variable, as on the command line). A ledger edited outside dpml is refused.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _native
from ._args import number, text
from .events import DpEvent

__all__ = ["Ledger", "PASSPHRASE_ENV"]

#: The environment variable a ledger's passphrase is read from when none is given.
PASSPHRASE_ENV = "DPML_LEDGER_PASSPHRASE"


def _unix(rfc3339: str) -> int:
    return int(datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp())


class _Record(dict):
    """A ledger object (balance or entry) whose earlier field names still read as aliases."""

    _ALIASES = {
        "spent_epsilon": ("spent", None),
        "remaining_epsilon": ("remaining", None),
        "time_unix": ("time", _unix),
    }

    def __missing__(self, key: str) -> Any:
        if key in self._ALIASES:
            name, convert = self._ALIASES[key]
            value = self[name]
            return convert(value) if convert else value
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


def record(value: Any) -> Any:
    """``value`` with every ledger object in it readable by the alias names too."""
    if isinstance(value, dict):
        return _Record({k: record(v) for k, v in value.items()})
    if isinstance(value, list):
        return [record(v) for v in value]
    return value


class Ledger:
    """A budget ledger: every spend is recorded durably before anything is released.

    The file is the one ``dpml ledger create`` makes and every ``--ledger`` of the command line
    charges; balances and entries have the command line's field names (``dpml ledger show
    --json``). Spends compose with the tightest accountant that covers them (PLD, RDP, or adding
    up), as on the command line, and a spend over budget raises :class:`ValueError` before
    anything is released. Pass it as ``ledger=`` to any estimator, mechanism or statistic.

    Parameters
    ----------
    path : str or os.PathLike
        The ledger file. A missing file is created only when ``budget`` is given, so a typo
        in the path never starts a fresh budget.
    budget : float, optional
        Total epsilon budget of a new ledger; an existing ledger keeps its stored budget (a
        different one given is refused).
    budget_delta : float, optional
        Total delta budget of a new ledger (default 1e-5; 0: a pure-epsilon ledger).
    key_file : str or os.PathLike, optional
        The key file that seals the ledger (default: ``path + ".key"``, made with 0600
        permissions when the ledger is created).
    passphrase : str, optional
        Derive the key from this passphrase instead of a key file (default: the
        ``DPML_LEDGER_PASSPHRASE`` environment variable, as on the command line).

    Raises
    ------
    ValueError
        For a missing ledger without a budget, a different budget, a key that does not open
        it, rows changed outside dpml, or a corrupt file.

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
        key_file: Union[str, "os.PathLike[str]", None] = None,
        passphrase: Optional[str] = None,
    ) -> None:
        self.path = os.fspath(path)
        self._key_file = None if key_file is None else os.fspath(key_file)
        if passphrase is None:
            passphrase = os.environ.get(PASSPHRASE_ENV) or None
        self._inner = _native.Ledger(self.path, budget, budget_delta, self._key_file, passphrase)

    def balance(self) -> Dict[str, Any]:
        """Where the ledger stands.

        Returns
        -------
        dict
            ``spent`` and ``remaining`` epsilon, ``spent_delta`` and ``remaining_delta``, the
            number of ``entries`` and the ``composition`` that produced the totals.
        """
        return record(json.loads(self._inner.balance_json()))

    def entries(self) -> List[Dict[str, Any]]:
        """Every recorded spend, oldest first.

        Returns
        -------
        list of dict
            ``id``, ``time`` (UTC, RFC 3339), ``command``, ``dataset``, ``label``, ``event``,
            ``epsilon``, ``delta``, ``run``, ``neighbouring`` and ``epsilon_at_ledger_delta``
            (the entry's epsilon alone at the ledger's delta), as ``dpml ledger show --json``
            lists them.
        """
        return record(json.loads(self._inner.entries_json()))

    def history(self) -> List[Dict[str, Any]]:
        """Every entry with ``epsilon_at_ledger_delta`` and ``spent_after`` (the spend over
        time: one composition per entry), as ``dpml ledger show --plot`` lists them."""
        return record(json.loads(self._inner.entries_json(True)))

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
            Its epsilon by itself, at ``delta``. Basic composition adds it up, so an epsilon
            below what ``event`` provably costs at ``delta`` (a lower bound from the
            optimistic PLD accountant) raises ValueError.
        delta : float, default 0
            Its delta by itself.

        Returns
        -------
        dict
            The balance after the spend (as :meth:`balance`).
        """
        epsilon, delta = number(epsilon, "epsilon"), number(delta, "delta")
        label = text(label, "label")
        if not isinstance(event, DpEvent):
            raise ValueError(f"event must be a DpEvent (see dpml.events), got {event!r}")
        return record(json.loads(self._inner.spend(label, event.to_json(), epsilon, delta)))

    def __repr__(self) -> str:
        return f"Ledger({self.path!r})"

    # One file, one account: a copy (scikit-learn's ``clone`` of an estimator holding the
    # ledger) charges the same ledger, and a pickled one reopens the same file. A passphrase is
    # never pickled: the unpickled ledger reads DPML_LEDGER_PASSPHRASE (or its key file).
    def __copy__(self) -> "Ledger":
        return self

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Ledger":
        return self

    def __reduce__(self) -> Tuple[Any, ...]:
        return (Ledger, (self.path, None, None, self._key_file))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ledger) and os.path.realpath(self.path) == os.path.realpath(
            other.path
        )

    def __hash__(self) -> int:
        return hash(os.path.realpath(self.path))


def native(ledger: Optional[Ledger]) -> Any:
    """The extension's ledger inside ``ledger`` (``None`` for none), refusing anything else by
    name: a path where a :class:`Ledger` belongs would otherwise charge nothing."""
    if ledger is None:
        return None
    if not isinstance(ledger, Ledger):
        raise ValueError(f"ledger must be a dpml.Ledger, got {type(ledger).__name__}")
    return ledger._inner
