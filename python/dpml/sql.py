"""Differentially private SQL over Parquet and CSV tables (the engine of ``dpml sql``).

The schema file declares each table's privacy unit, bounds, key sets and contribution bounds
(``[tables.NAME]``, see the user guide's SQL chapter). :func:`sql` returns the released table
as a :class:`pyarrow.Table` (``.to_pandas()`` for pandas); its schema metadata ``b"dpml"``
holds the release's facts as JSON: each aggregate's mechanism, noise scale, sensitivity and
95% half-width, epsilon, delta, the neighbouring relation and what was public. With a ledger,
the spend is recorded durably before the table is returned; over budget, nothing is returned.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _native
from .ledger import Ledger, native

__all__ = ["sql", "sql_explain", "sql_report"]

PathLike = Union[str, "os.PathLike[str]"]


def _tables(tables: Mapping[str, PathLike]) -> List[Tuple[str, str]]:
    return [(str(name), os.fspath(path)) for name, path in tables.items()]


def sql(
    query: str,
    tables: Mapping[str, PathLike],
    schema: PathLike,
    epsilon: float,
    delta: float = 0.0,
    ledger: Optional[Ledger] = None,
    weights: Optional[Mapping[str, float]] = None,
    seed: Optional[int] = None,
) -> Any:
    """Answers ``query`` with (epsilon, delta)-differential privacy; returns a ``pyarrow.Table``.

    ``tables`` maps each table name to a Parquet file, a folder of Parquet files, or a CSV
    (``.csv.gz`` too) file; ``schema`` is the schema file. ``ledger`` (a
    :class:`dpml.Ledger`) is charged before anything is returned; ``weights`` gives some
    aggregates (by output column name) a larger share of epsilon; ``seed`` makes the noise
    reproducible (tests only: a seeded release is not private).
    """
    import pyarrow as pa  # type: ignore[import-untyped]

    stream, report = _native.sql_run(
        query,
        _tables(tables),
        os.fspath(schema),
        float(epsilon),
        float(delta),
        None if weights is None else {str(k): float(v) for k, v in weights.items()},
        native(ledger),
        seed,
    )
    table = pa.RecordBatchReader.from_stream(stream).read_all()
    metadata = dict(table.schema.metadata or {})
    metadata[b"dpml"] = report.encode()
    return table.replace_schema_metadata(metadata)


def sql_report(table: Any) -> Dict[str, Any]:
    """The release facts of a table returned by :func:`sql` (its ``b"dpml"`` metadata)."""
    return json.loads(table.schema.metadata[b"dpml"])


def sql_explain(
    query: str,
    tables: Mapping[str, PathLike],
    schema: PathLike,
    epsilon: float,
    delta: float = 0.0,
    weights: Optional[Mapping[str, float]] = None,
) -> Dict[str, Any]:
    """What ``query`` would release and cost (the rewritten plan, each aggregate's noise, the
    key threshold, epsilon and delta), reading no private row and charging nothing."""
    return json.loads(
        _native.sql_explain(
            query,
            _tables(tables),
            os.fspath(schema),
            float(epsilon),
            float(delta),
            None if weights is None else {str(k): float(v) for k, v in weights.items()},
        )
    )
