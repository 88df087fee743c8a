"""Differentially private SQL over Parquet and CSV tables (the engine of ``dpml sql``).

The schema file declares each table's privacy unit, bounds, key sets and contribution bounds
(``[tables.NAME]``, see the user guide's SQL chapter). :func:`sql` returns the released table
as a :class:`pyarrow.Table` (``.to_pandas()`` for pandas); its schema metadata ``b"dpml"``
holds the release's facts as JSON: each aggregate's mechanism, noise scale, sensitivity and
95% half-width, epsilon, delta, the neighbouring relation and what was public. With a ledger,
the spend is recorded durably before any private row is read; over budget, nothing is read or
returned, and a query that fails while it reads them keeps its charge (whether it fails can
depend on them). With ``memory_limit``, the query runs in a memory pool of that size and
spills sorts, aggregations and joins to a temporary folder; a query that still does not fit
raises ``ValueError`` ("the query needs more than the memory limit …") and is charged. With
``cluster="HOST:PORT"``, the private rows are read on an Apache Ballista cluster, as
``dpml sql --cluster`` reads them.
"""

from __future__ import annotations

import json
import os
from collections import abc
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _native
from ._args import number, shown
from ._args import seed as _seed
from .ledger import Ledger, native

__all__ = ["sql", "sql_explain", "sql_report"]

PathLike = Union[str, "os.PathLike[str]"]


def _path(value: Any, name: str) -> str:
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if isinstance(path, str):
            return path
    raise ValueError(f"{name} must be a file path (str or os.PathLike), got {shown(value)}")


def _tables(tables: Mapping[str, PathLike]) -> List[Tuple[str, str]]:
    if not isinstance(tables, abc.Mapping):
        raise ValueError(f"tables must be a dict of table name -> file path, got {shown(tables)}")
    return [(str(name), _path(path, f"tables[{name!r}]")) for name, path in tables.items()]


def _cluster(cluster: Optional[str]) -> Optional[str]:
    if cluster is not None and not isinstance(cluster, str):
        raise TypeError(f"cluster must be 'HOST:PORT', got {cluster!r}")
    return cluster


def _memory_limit(limit: Optional[Union[int, str]]) -> Optional[str]:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, (int, str)):
        raise TypeError(f"memory_limit must be bytes (int) or a size such as '4G', got {limit!r}")
    return str(limit)


def _weights(weights: Optional[Mapping[str, float]]) -> Optional[Dict[str, float]]:
    if weights is None:
        return None
    if not isinstance(weights, abc.Mapping):
        raise ValueError(
            f"weights must be a dict of output column -> share of epsilon, got {shown(weights)}"
        )
    return {str(k): number(v, f"weights[{k!r}]") for k, v in weights.items()}


def sql(
    query: str,
    tables: Mapping[str, PathLike],
    schema: PathLike,
    epsilon: float,
    delta: float = 0.0,
    ledger: Optional[Ledger] = None,
    weights: Optional[Mapping[str, float]] = None,
    seed: Optional[int] = None,
    memory_limit: Optional[Union[int, str]] = None,
    cluster: Optional[str] = None,
) -> Any:
    """Answers ``query`` with (epsilon, delta)-differential privacy, as ``dpml sql`` does.

    Each privacy unit's contributions are bounded as the schema declares, every released cell
    gets noise once (exact discrete Laplace), and the ledger, if any, is charged before any
    private row is read. Constructs that cannot be bounded are refused before that, and cost
    nothing.

    Parameters
    ----------
    query : str
        One SELECT. A query that starts with ``EXPLAIN DP`` is refused (ValueError,
        nothing charged): :func:`sql_explain` gives the explanation.
    tables : mapping of str to path
        Each table's name and its Parquet file, folder of Parquet files, or CSV file
        (``.csv.gz`` too).
    schema : path
        The schema file (TOML or JSON, ``[tables.NAME]``): privacy units, public tables,
        bounds, contribution bounds, key sets and foreign keys. Public: it is not protected.
    epsilon : float
        Epsilon of the whole query, split across its aggregates.
    delta : float, optional
        Delta of the whole query (default 0: pure epsilon-DP). Grouping by private keys
        needs delta > 0 (keys are released past a noisy threshold).
    ledger : Ledger, optional
        Charged before any private row is read; a query that would overspend raises and
        reads nothing, and a query that fails once it reads them (a memory limit, a lost
        executor) raises and keeps its charge, since whether it fails can depend on them.
    weights : mapping of str to float, optional
        Relative shares of epsilon per aggregate, by output column name (default even).
    seed : int, optional
        For tests only (a seeded release is not private).
    memory_limit : int or str, optional
        Run under this much memory: bytes, or a size with K, M, G or T (``"4G"``). Sorts,
        aggregations and joins spill to a temporary folder; a query that still does not fit
        raises ``ValueError`` and is charged (whether it fits depends on the private rows).
        Default: no limit.
    cluster : str, optional
        ``"HOST:PORT"`` of an Apache Ballista scheduler: its executors read the private rows
        and compute exact per-unit state only; the bounding, the noise and the ledger stay in
        this process (see the guide's SQL chapter for starting a cluster). A scheduler out of
        reach raises before the charge; not with ``memory_limit``. Default: this machine.

    Returns
    -------
    pyarrow.Table
        The released rows; the release's facts (each aggregate's mechanism, noise scale,
        sensitivity and 95% half-width, epsilon, delta, the neighbouring relation, what was
        public) as JSON in the schema metadata ``b"dpml"`` (read them with
        :func:`sql_report`).

    Examples
    --------
    >>> t = dpml.sql("SELECT day, COUNT(*) AS visits FROM visits GROUP BY day",
    ...              {"visits": "examples/shop_visits.csv"}, "examples/shop.toml",
    ...              epsilon=1.0)  # doctest: +SKIP
    >>> t.to_pandas()  # doctest: +SKIP
    """
    import pyarrow as pa  # type: ignore[import-untyped]

    stream, report = _native.sql_run(
        query,
        _tables(tables),
        _path(schema, "schema"),
        number(epsilon, "epsilon"),
        number(delta, "delta"),
        _weights(weights),
        native(ledger),
        _seed(seed),
        _memory_limit(memory_limit),
        _cluster(cluster),
    )
    table = pa.RecordBatchReader.from_stream(stream).read_all()
    metadata = dict(table.schema.metadata or {})
    metadata[b"dpml"] = report.encode()
    return table.replace_schema_metadata(metadata)


def sql_report(table: Any) -> Dict[str, Any]:
    """The release facts of a table returned by :func:`sql`.

    Parameters
    ----------
    table : pyarrow.Table
        A table :func:`sql` returned.

    Returns
    -------
    dict
        Its ``b"dpml"`` metadata: the fields of ``dpml sql --json`` but ``rows``
        (``memory_limit``: the limit it ran under, in bytes, or None; ``cluster``: the
        scheduler's address, or None).
    """
    metadata = getattr(getattr(table, "schema", None), "metadata", None)
    report = metadata.get(b"dpml") if isinstance(metadata, abc.Mapping) else None
    if report is None:
        raise ValueError(
            f"table must be a table returned by dpml.sql (with its b\"dpml\" metadata), "
            f"got {shown(table)}"
        )
    try:
        facts = json.loads(report)
    except (ValueError, RecursionError):
        facts = None
    if not isinstance(facts, dict):
        raise ValueError('table\'s b"dpml" metadata is not the report of dpml.sql')
    return facts


def sql_explain(
    query: str,
    tables: Mapping[str, PathLike],
    schema: PathLike,
    epsilon: float,
    delta: float = 0.0,
    weights: Optional[Mapping[str, float]] = None,
    memory_limit: Optional[Union[int, str]] = None,
    cluster: Optional[str] = None,
) -> Dict[str, Any]:
    """What ``query`` would release and cost, as ``dpml sql --explain`` shows it.

    Reads no private row and charges nothing: the rewritten plan, each released aggregate's
    mechanism, noise scale and 95% interval, the key threshold and the chance that a key with
    n units is released, and the epsilon and delta the query would cost.

    Parameters
    ----------
    query : str
        One SELECT.
    tables : mapping of str to path
        As :func:`sql` (only their schemas are read).
    schema : path
        As :func:`sql`.
    epsilon : float
        Epsilon of the whole query.
    delta : float, optional
        Delta of the whole query (default 0).
    weights : mapping of str to float, optional
        As :func:`sql`.
    memory_limit : int or str, optional
        As :func:`sql` (public key sets are read under it).
    cluster : str, optional
        As :func:`sql`.

    Returns
    -------
    dict
        The explanation (the JSON of ``dpml sql --explain --json``).
    """
    return json.loads(
        _native.sql_explain(
            query,
            _tables(tables),
            _path(schema, "schema"),
            number(epsilon, "epsilon"),
            number(delta, "delta"),
            _weights(weights),
            _memory_limit(memory_limit),
            _cluster(cluster),
        )
    )
