"""dpml: differentially private machine learning with a Rust core.

Submodules:

- :mod:`dpml.accounting` -- Opacus-style accountants (RDP, PLD, GDP), dp_accounting-style
  privacy events, calibration and f-DP trade-off curves.
- :mod:`dpml.audit` -- audit any model from its membership-inference scores.
- :mod:`dpml.mechanisms` and :mod:`dpml.stats` -- exact noise samplers and DP statistics.
- :mod:`dpml.learn` -- scikit-learn style private estimators.
- :func:`dpml.sql` -- differentially private SQL over Parquet and CSV tables.
- :mod:`dpml.tuning` -- private hyperparameter search (``DPSearchCV``), counted in epsilon.

The command line and this package are two fronts over one Rust library: the same recipes,
defaults, field names and model files. Every failure on bad input raises :class:`ValueError`
with the message the ``dpml`` command line prints after ``error:`` (its flags written as this
package's keywords).
"""

from . import _native
from . import accounting, audit, events, learn, mechanisms, stats, tuning
from .ledger import Ledger
from .sql import sql, sql_explain, sql_report

__version__: str = _native.__version__

__all__ = [
    "accounting",
    "audit",
    "events",
    "learn",
    "mechanisms",
    "stats",
    "tuning",
    "sql",
    "sql_explain",
    "sql_report",
    "Ledger",
    "__version__",
]
