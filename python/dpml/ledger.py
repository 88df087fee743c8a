"""A durable privacy budget ledger (the SQLite file of the CLI's ``--ledger``).

The ledger's JSON uses one name per concept on both fronts: a balance has ``spent``,
``remaining``, ``spent_delta``, ``remaining_delta``, ``entries`` and ``composition``; an entry
has ``id``, ``time`` (RFC 3339, UTC), ``command``, ``dataset``, ``label``, ``event``,
``epsilon``, ``delta`` and ``run``. The names earlier versions of this package used
(``spent_epsilon``, ``remaining_epsilon``, ``time_unix``) still read as aliases.

Every row of a ledger is sealed with a key kept outside the file: by default the key file
beside it (``path + ".key"``, made with 0600 permissions when the ledger is created), or
``key_file``, or a key derived from ``passphrase`` (default: the ``DPML_LEDGER_PASSPHRASE``
environment variable, as on the command line). A ledger edited outside dpml is refused.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any, Dict, List, Optional

from . import _native
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

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
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
    """A budget ledger at ``path``: created with the budget ``(budget, budget_delta)`` when
    missing; an existing ledger keeps its stored budget (a different one given is refused).

    Spends compose with the tightest accountant that covers them (PLD, RDP, or adding up), as
    on the command line, and a spend over budget raises :class:`ValueError` before any value is
    returned.
    """

    def __init__(
        self,
        path: str,
        budget: Optional[float] = None,
        budget_delta: Optional[float] = None,
        key_file: Optional[str] = None,
        passphrase: Optional[str] = None,
    ) -> None:
        self.path = str(path)
        if passphrase is None:
            passphrase = os.environ.get(PASSPHRASE_ENV) or None
        self._inner = _native.Ledger(
            self.path,
            budget,
            budget_delta,
            None if key_file is None else str(key_file),
            passphrase,
        )

    def balance(self) -> Dict[str, Any]:
        """Spent and remaining epsilon and delta, the number of entries and the composition."""
        return record(json.loads(self._inner.balance_json()))

    def entries(self) -> List[Dict[str, Any]]:
        """Every recorded spend, oldest first."""
        return record(json.loads(self._inner.entries_json()))

    def history(self) -> List[Dict[str, Any]]:
        """Every entry with ``epsilon_at_ledger_delta`` and ``spent_after`` (the spend over time:
        one composition per entry)."""
        return record(json.loads(self._inner.history_json()))

    def spend(self, label: str, event: DpEvent, epsilon: float, delta: float = 0.0) -> Dict[str, Any]:
        """Records a spend of ``(epsilon, delta)`` described by ``event``; returns the balance."""
        return record(json.loads(self._inner.spend(label, event.to_json(), float(epsilon), float(delta))))

    def __repr__(self) -> str:
        return f"Ledger({self.path!r})"
