"""Tumult Analytics (Spark local mode) on the prepared queries.

The customer is the ID (``AddRowsWithID("unit")``). Tumult's private joins must include the ID
column in the join key, so a line item cannot reach its customer through ``l_orderkey``: the
pandas steps of queries.py attach it, then the rows go to Spark. Each released column is one
``Session.evaluate`` with that column's share of epsilon as dpml splits it (Tumult's average
spends its share on a sum and a count itself); private keys are ``get_groups`` with the
selection share and all of delta, then the aggregates over the released keys. Bounds:
``MaxGroupsPerID`` = L0 and ``MaxRowsPerGroupPerID`` = L-infinity on the group column (one
combined column when the query groups by two, as Tumult truncates groups per column). Tumult has
no per-ID sum bound, so q18's per-customer totals are summed and clamped in pandas and Tumult
then sees one row per customer.
"""

import atexit
import os
import shutil
import sys
import tempfile
import warnings

from harness import main
import queries as Q

KEY = "__key"


def setup():
    from pyspark.sql import SparkSession

    # Spark's Python workers must run in this environment, where tmlt is installed.
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Tumult keeps temporary tables in Spark's warehouse: a folder of ours, not the working one.
    warehouse = tempfile.mkdtemp(prefix="sql-peers-spark-")
    atexit.register(shutil.rmtree, warehouse, ignore_errors=True)
    spark = (
        SparkSession.builder.master(f"local[{os.cpu_count()}]")
        .config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Local mode on a few cores: Spark's default of 200 shuffle partitions is for clusters.
        .config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 1)))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    warnings.filterwarnings("ignore", category=UserWarning)  # pyspark's pandas-UDF type hints
    return spark


def per_unit_totals(query, frame):
    """One row per unit: its totals clamped into the declared sum bounds (q18)."""
    agg = next(a for a in query.aggs if a.sum_bounds)
    totals = frame.groupby(Q.UNIT, as_index=False)[agg.column].sum()
    totals[agg.column] = totals[agg.column].clip(*agg.sum_bounds)
    return totals


def run(spark, query, frame, keys, plan):
    from tmlt.analytics import (
        AddRowsWithID, ApproxDPBudget, KeySet, MaxGroupsPerID, MaxRowsPerGroupPerID,
        MaxRowsPerID, PureDPBudget, QueryBuilder, Session)

    l0, linf = plan["l0"], plan["linf"]
    value_cols = sorted({a.column for a in query.aggs if a.column})
    summed = any(a.sum_bounds for a in query.aggs)
    if summed:
        frame, linf = per_unit_totals(query, frame), 1
    pdf = frame[[Q.UNIT] + value_cols].copy()
    if query.keys:
        pdf[KEY] = frame[query.keys].astype(str).agg("|".join, axis=1)
    total = sum(plan["epsilon"].values()) + plan["select_epsilon"]
    budget = ApproxDPBudget(total, plan["delta"]) if plan["delta"] > 0 else PureDPBudget(total)
    session = Session.from_dataframe(privacy_budget=budget, source_id="t",
                                     dataframe=spark.createDataFrame(pdf).cache(),
                                     protected_change=AddRowsWithID(Q.UNIT))

    def share(eps, delta=0.0):
        return ApproxDPBudget(eps, delta) if plan["delta"] > 0 else PureDPBudget(eps)

    def base():
        if not query.keys:
            return QueryBuilder("t").enforce(MaxRowsPerID(linf))
        return (QueryBuilder("t").enforce(MaxGroupsPerID(KEY, l0))
                .enforce(MaxRowsPerGroupPerID(KEY, linf)))

    if query.keys:
        if keys is None:
            released = session.evaluate(base().get_groups([KEY]),
                                        share(plan["select_epsilon"], plan["delta"]))
            keyset = KeySet.from_dataframe(released)
        else:
            keyset = KeySet.from_dict({KEY: ["|".join(k) for k in keys]})
    out = {}
    for agg in query.aggs:
        b = base().groupby(keyset) if query.keys else base()
        lo, hi = (agg.sum_bounds if summed and agg.sum_bounds else agg.bounds) or (0, 0)
        if agg.kind == "sum":
            q = b.sum(agg.column, lo, hi, name="v")
        elif agg.kind == "avg":
            q = b.average(agg.column, lo, hi, name="v")
        elif agg.kind == "count":
            q = b.count(name="v")
        else:
            q = b.count_distinct([Q.UNIT], name="v")
        answer = session.evaluate(q, share(plan["epsilon"][agg.name])).toPandas()
        for _, r in answer.iterrows():
            key = tuple(str(r[KEY]).split("|")) if query.keys else ()
            out.setdefault(key, {})[agg.name] = float(r["v"]) if r["v"] == r["v"] else None
    return out


if __name__ == "__main__":
    main(setup, run)
