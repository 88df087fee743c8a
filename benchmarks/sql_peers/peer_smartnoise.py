"""SmartNoise SQL (pandas engine) on the prepared queries.

SmartNoise SQL answers SQL over one table: joins, subqueries and aggregates over expressions
are refused by its validator ("Support for JOIN queries is currently disabled"), so it gets the
rows of queries.py's pandas steps (price expressions included) and a generated SELECT ... GROUP
BY over them. Its contribution bound is one number, ``max_ids``: the rows one unit may have in
the whole table (a reservoir sample), set to L0 x L-infinity, which gives each count and sum
the sensitivity dpml's bounds give. It has no public key sets: every GROUP BY key is released
by its threshold on a noisy count of units (``censor_dims``), which uses delta. It spends the
same epsilon on each noisy statistic (AVG reuses the sum and the count): that epsilon and delta
are set so that its own accountant (``get_privacy_cost``) reports the query's total epsilon and
at most its delta. No per-unit sum bound: q18's per-customer totals are summed and clamped in
pandas (one row per customer, ``max_ids`` = 1).
"""

import warnings

import snsql

import queries as Q
from harness import main
from peer_tumult import per_unit_totals

SQL = {"sum": "SUM({c})", "avg": "AVG({c})", "count": "COUNT(*)",
       "units": f"COUNT(DISTINCT {Q.UNIT})"}


def setup():
    warnings.filterwarnings("ignore")  # its floating-point mechanism warning, on every reader
    return None


def sql_of(query):
    cols = [f"{SQL[a.kind].format(c=a.column)} AS {a.name}" for a in query.aggs]
    group = f" GROUP BY {', '.join(query.keys)}" if query.keys else ""
    return f"SELECT {', '.join(query.keys + cols)} FROM t.t{group}"


def metadata(query, max_ids, summed):
    cols = {Q.UNIT: {"type": "int", "private_id": True}}
    for k in query.keys:
        cols[k] = {"type": "string"}
    for a in query.aggs:
        if a.column:
            lo, hi = a.sum_bounds if summed and a.sum_bounds else a.bounds
            cols[a.column] = {"type": "float", "lower": lo, "upper": hi}
    return {"db": {"t": {"t": {"max_ids": max_ids, "censor_dims": True, **cols}}}}


def reader(frame, meta, epsilon, delta):
    return snsql.from_df(frame, privacy=snsql.Privacy(epsilon=epsilon, delta=delta), metadata=meta)


def run(_, query, frame, keys, plan):
    max_ids = plan["l0"] * plan["linf"]
    summed = any(a.sum_bounds for a in query.aggs)
    if summed:
        frame, max_ids = per_unit_totals(query, frame), 1
    frame = frame[[Q.UNIT] + query.keys + sorted({a.column for a in query.aggs if a.column})]
    frame = frame.astype({k: str for k in query.keys})
    meta, sql = metadata(query, max_ids, summed), sql_of(query)
    target_eps = sum(plan["epsilon"].values()) + plan["select_epsilon"]
    target_delta = 1e-6 if plan["delta"] == 0 else plan["delta"]  # thresholds need some delta
    # Its epsilon cost is linear in the per-statistic epsilon; its delta cost nearly so in delta:
    # scale both to the query's totals, then shrink delta until its accountant agrees.
    eps_cost, delta_cost = reader(frame, meta, 1.0, target_delta).get_privacy_cost(sql)
    eps, delta = target_eps / eps_cost, target_delta * min(1.0, target_delta / delta_cost)
    for _ in range(20):
        r = reader(frame, meta, eps, delta)
        spent_eps, spent_delta = r.get_privacy_cost(sql)
        if spent_delta <= target_delta:
            break
        delta *= 0.999 * target_delta / spent_delta
    if spent_eps > target_eps * (1 + 1e-9) or spent_delta > target_delta:
        raise RuntimeError(f"could not fit its cost ({spent_eps}, {spent_delta}) in the budget")
    answer = r.execute_df(sql)
    out = {}
    for _, row in answer.iterrows():
        key = Q.key_str(tuple(row[k] for k in query.keys))
        out[key] = {a.name: (float(row[a.name]) if row[a.name] == row[a.name] else None)
                    for a in query.aggs}
    return out


if __name__ == "__main__":
    main(setup, run)
