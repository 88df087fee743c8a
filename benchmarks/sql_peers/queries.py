"""The TPC-H DP queries of benchmarks/sql/ as pandas steps every peer shares.

Each query is split into what any peer must do before its DP aggregation (``prepare``: filters,
joins that attach the privacy unit ``unit`` = the customer key, per-unit subqueries) and the DP
aggregation itself (``keys``, ``aggs``), which each peer runs through its own API. The exact
answer (a diagnostic: no noise) is the same aggregation without DP on the prepared rows.

Value bounds, key sets and sum bounds are read from the DP schema (schema.toml); the
contribution bounds (L0, L-infinity) and the split of epsilon are read from dpml's own
``--explain --json`` report of the query, so every system runs with dpml's bounds and budget.
This module needs only pandas and pyarrow (it is imported in every peer's environment).
"""

import tomllib
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

UNIT = "unit"


@dataclass
class Agg:
    """One released column: ``kind`` is sum, avg, count (rows) or units (distinct units)."""

    name: str
    kind: str
    column: str | None = None
    bounds: tuple | None = None
    # One unit's total in one group is clamped into this range (schema's sum_bounds).
    sum_bounds: tuple | None = None


@dataclass
class Query:
    name: str
    tables: dict  # table -> columns read
    prepare: object  # function(tables: dict[str, DataFrame], schema) -> DataFrame
    keys: list  # group columns of the prepared frame
    aggs: list
    # Public key set: function(tables, schema) -> list of key tuples; None: private keys.
    public_keys: object = None
    steps: str = ""  # what prepare does, in words (the notes column)


def read_table(path, columns):
    """One Parquet table as pandas: strings as str, decimals as float64, dates as datetime64."""
    table = pq.read_table(path, columns=columns)
    fields = []
    for f in table.schema:
        t = f.type
        if pa.types.is_decimal(t):
            t = pa.float64()
        elif pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view":
            t = pa.string()
        elif pa.types.is_date(t):
            t = pa.timestamp("ms")
        fields.append(pa.field(f.name, t))
    return table.cast(pa.schema(fields)).to_pandas()


def load(data_dir, query):
    return {t: read_table(f"{data_dir}/{t}.parquet", cols) for t, cols in query.tables.items()}


def load_schema(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def column(schema, table, name):
    for c in schema["tables"][table].get("columns", []):
        if c["name"] == name:
            return c
    raise KeyError(f"{table}.{name} is not declared in the schema")


def bounds(schema, table, name):
    return tuple(float(b) for b in column(schema, table, name)["bounds"])


def declared_keys(schema, table, name):
    return column(schema, table, name)["keys"]


def mul(a, b):
    """Interval product, as dpml bounds an expression."""
    p = [x * y for x in a for y in b]
    return (min(p), max(p))


def disc_price_bounds(s):
    price = bounds(s, "lineitem", "l_extendedprice")
    lo, hi = bounds(s, "lineitem", "l_discount")
    return mul(price, (1 - hi, 1 - lo))


def charge_bounds(s):
    lo, hi = bounds(s, "lineitem", "l_tax")
    return mul(disc_price_bounds(s), (1 + lo, 1 + hi))


def day(text):
    return pd.Timestamp(text)


def attach_unit(lineitem, orders):
    """Line items joined to their order: each line item gets its customer as ``unit``."""
    return lineitem.merge(orders, left_on="l_orderkey", right_on="o_orderkey").rename(
        columns={"o_custkey": UNIT}
    )


def add_prices(df):
    df["disc_price"] = df["l_extendedprice"] * (1 - df["l_discount"])
    return df


# --- the queries ---------------------------------------------------------------------------

LINE_Q1 = ["l_orderkey", "l_quantity", "l_extendedprice", "l_discount", "l_tax",
           "l_returnflag", "l_linestatus", "l_shipdate"]


def prep_q1(t, s):
    li = t["lineitem"]
    li = li[li["l_shipdate"] <= day("1998-09-02")]
    df = add_prices(attach_unit(li, t["orders"]))
    df["charge"] = df["disc_price"] * (1 + df["l_tax"])
    df["status"] = df["l_returnflag"] + df["l_linestatus"]
    return df


def q1_aggs(s):
    b = lambda c: bounds(s, "lineitem", c)  # noqa: E731
    return lambda: [
        Agg("sum_qty", "sum", "l_quantity", b("l_quantity")),
        Agg("sum_base_price", "sum", "l_extendedprice", b("l_extendedprice")),
        Agg("sum_disc_price", "sum", "disc_price", disc_price_bounds(s)),
        Agg("sum_charge", "sum", "charge", charge_bounds(s)),
        Agg("avg_qty", "avg", "l_quantity", b("l_quantity")),
        Agg("avg_price", "avg", "l_extendedprice", b("l_extendedprice")),
        Agg("avg_disc", "avg", "l_discount", b("l_discount")),
        Agg("count_order", "count"),
    ]


def prep_orderpriority(t, s):
    return t["orders"].rename(columns={"o_custkey": UNIT})


def prep_q3(t, s):
    c = t["customer"]
    c = c[c["c_mktsegment"] == "BUILDING"]
    o = t["orders"]
    o = o[o["o_orderdate"] < day("1995-03-15")]
    li = t["lineitem"]
    li = li[li["l_shipdate"] > day("1995-03-15")]
    df = attach_unit(li, o)
    df = df[df[UNIT].isin(c["c_custkey"])]
    return add_prices(df)


def prep_q5(t, s):
    o = t["orders"]
    o = o[(o["o_orderdate"] >= day("1994-01-01")) & (o["o_orderdate"] < day("1995-01-01"))]
    df = attach_unit(t["lineitem"], o)
    df = df.merge(t["customer"], left_on=UNIT, right_on="c_custkey")
    df = df.merge(t["supplier"], left_on="l_suppkey", right_on="s_suppkey")
    df = df[df["c_nationkey"] == df["s_nationkey"]]
    n = t["nation"].merge(t["region"], left_on="n_regionkey", right_on="r_regionkey")
    n = n[n["r_name"] == "ASIA"]
    df = df.merge(n, left_on="s_nationkey", right_on="n_nationkey")
    return add_prices(df)


def prep_q10(t, s):
    o = t["orders"]
    o = o[(o["o_orderdate"] >= day("1993-10-01")) & (o["o_orderdate"] < day("1994-01-01"))]
    li = t["lineitem"]
    li = li[li["l_returnflag"] == "R"]
    df = attach_unit(li, o)
    df = df.merge(t["customer"], left_on=UNIT, right_on="c_custkey")
    df = df.merge(t["nation"], left_on="c_nationkey", right_on="n_nationkey")
    return add_prices(df)


def prep_q13(t, s):
    o = t["orders"]
    o = o[~o["o_comment"].str.contains("special.*requests", regex=True)]
    per = o.groupby("o_custkey").size()
    c = t["customer"][["c_custkey"]].rename(columns={"c_custkey": UNIT})
    c["c_count"] = c[UNIT].map(per).fillna(0).astype("int64")
    return c


def prep_q18(t, s):
    li = t["lineitem"]
    qty = li.groupby("l_orderkey")["l_quantity"].sum()
    big = qty[qty > 300].index
    o = t["orders"]
    return o[o["o_orderkey"].isin(big)].rename(columns={"o_custkey": UNIT})


def nation_names(t, s):
    return [(n,) for n in sorted(t["nation"]["n_name"])]


def product_keys(*cols):
    def keys(t, s):
        out = [()]
        for table, col in cols:
            out = [k + (v,) for k in out for v in declared_keys(s, table, col)]
        return out

    return keys


def queries(schema):
    """The queries of benchmarks/sql/, by file name, with bounds from ``schema``."""
    s = schema
    rev = lambda: Agg("revenue", "sum", "disc_price", disc_price_bounds(s))  # noqa: E731
    q1 = q1_aggs(s)
    return {
        "orderpriority_histogram": Query(
            "orderpriority_histogram", {"orders": ["o_custkey", "o_orderpriority"]},
            prep_orderpriority, ["o_orderpriority"], [Agg("orders", "count")],
            public_keys=product_keys(("orders", "o_orderpriority")),
            steps="",
        ),
        "q1": Query(
            "q1", {"lineitem": LINE_Q1, "orders": ["o_orderkey", "o_custkey"]},
            prep_q1, ["l_returnflag", "l_linestatus"], q1(),
            public_keys=product_keys(("lineitem", "l_returnflag"), ("lineitem", "l_linestatus")),
            steps="lineitem joined to orders in pandas (attaches the customer); "
            "date filter and price expressions in pandas",
        ),
        "q1_private_keys": Query(
            "q1_private_keys", {"lineitem": LINE_Q1, "orders": ["o_orderkey", "o_custkey"]},
            prep_q1, ["status"], q1(),
            steps="lineitem joined to orders in pandas (attaches the customer); "
            "date filter, price expressions and status = flag || status in pandas",
        ),
        "q3": Query(
            "q3",
            {"customer": ["c_custkey", "c_mktsegment"],
             "orders": ["o_orderkey", "o_custkey", "o_orderdate"],
             "lineitem": ["l_orderkey", "l_extendedprice", "l_discount", "l_shipdate",
                          "l_shipmode"]},
            prep_q3, ["l_shipmode"], [rev(), Agg("customers", "units")],
            public_keys=product_keys(("lineitem", "l_shipmode")),
            steps="3-way join and filters in pandas",
        ),
        "q5": Query(
            "q5",
            {"customer": ["c_custkey", "c_nationkey"],
             "orders": ["o_orderkey", "o_custkey", "o_orderdate"],
             "lineitem": ["l_orderkey", "l_suppkey", "l_extendedprice", "l_discount"],
             "supplier": ["s_suppkey", "s_nationkey"],
             "nation": ["n_nationkey", "n_name", "n_regionkey"],
             "region": ["r_regionkey", "r_name"]},
            prep_q5, ["n_name"], [rev()],
            public_keys=nation_names,
            steps="6-way join and filters in pandas",
        ),
        "q10": Query(
            "q10",
            {"customer": ["c_custkey", "c_nationkey"],
             "orders": ["o_orderkey", "o_custkey", "o_orderdate"],
             "lineitem": ["l_orderkey", "l_extendedprice", "l_discount", "l_returnflag"],
             "nation": ["n_nationkey", "n_name"]},
            prep_q10, ["n_name"], [rev(), Agg("customers", "units")],
            public_keys=nation_names,
            steps="4-way join and filters in pandas",
        ),
        "q13": Query(
            "q13", {"customer": ["c_custkey"], "orders": ["o_orderkey", "o_custkey", "o_comment"]},
            prep_q13, ["c_count"], [Agg("custdist", "count")],
            steps="per-customer order counts (the subquery, with its LEFT JOIN) in pandas",
        ),
        "q18": Query(
            "q18",
            {"orders": ["o_orderkey", "o_custkey", "o_totalprice"],
             "lineitem": ["l_orderkey", "l_quantity"]},
            prep_q18, [],
            [Agg("customers", "units"),
             Agg("total_price", "sum", "o_totalprice", bounds(s, "orders", "o_totalprice"),
                 tuple(float(b) for b in column(s, "orders", "o_totalprice")["sum_bounds"]))],
            public_keys=lambda t, s: [()],
            steps="per-order quantity subquery (IN ... HAVING) in pandas",
        ),
    }


def key_str(key):
    """A group key as a tuple of strings, the form every system's rows are compared in."""
    return tuple(str(k) for k in key)


def exact(query, df):
    """The exact answer (no noise, a diagnostic): {key tuple: {column: value}}."""
    out = {}
    groups = df.groupby(query.keys, sort=False) if query.keys else [((), df)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        row = {}
        for a in query.aggs:
            if a.kind == "sum":
                row[a.name] = float(g[a.column].sum())
            elif a.kind == "avg":
                row[a.name] = float(g[a.column].mean())
            elif a.kind == "count":
                row[a.name] = float(len(g))
            else:
                row[a.name] = float(g[UNIT].nunique())
        out[key_str(key)] = row
    return out
