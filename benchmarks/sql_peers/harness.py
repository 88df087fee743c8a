"""What every peer's runner shares: read the plan the driver wrote, time each run, write results.

A peer module calls ``main(setup, run)``: ``setup()`` starts the system once (a Spark session)
and is timed apart; ``run(state, query, frame, keys, plan)`` answers one prepared query with DP
(``keys``: the public key set, None for private keys) and returns
``{key tuple of str: {column: value}}``. An exception is reported as the query's failure.
One run's wall time covers reading the Parquet files, the pandas steps and the DP aggregation.
"""

import json
import sys
import time
import traceback

import queries as Q


def main(setup, run):
    plan_path, out_path = sys.argv[1], sys.argv[2]
    with open(plan_path) as f:
        plan = json.load(f)
    schema = Q.load_schema(plan["schema"])
    qs = Q.queries(schema)
    t0 = time.perf_counter()
    state = setup()
    out = {"setup_seconds": time.perf_counter() - t0, "queries": {}}
    for name, qplan in plan["queries"].items():
        query = qs[name]
        result = {"runs": []}
        try:
            first = time.perf_counter()
            for _ in range(plan["runs"]):
                if result["runs"] and time.perf_counter() - first > plan["max_seconds"]:
                    break  # fewer runs: the table says how many
                start = time.perf_counter()
                tables = Q.load(plan["data"], query)
                frame = query.prepare(tables, schema)
                keys = query.public_keys(tables, schema) if query.public_keys else None
                dp_start = time.perf_counter()
                rows = run(state, query, frame, keys, qplan)
                end = time.perf_counter()
                result["runs"].append(
                    {"seconds": end - start, "dp_seconds": end - dp_start,
                     "rows": [[list(k), v] for k, v in rows.items()]}
                )
            result["status"] = "ok"
        except Exception as e:  # a failure is reported as one, never as a number
            traceback.print_exc(file=sys.stderr)
            result = {"status": "error", "reason": " ".join(f"{type(e).__name__}: {e}".split())[:300], "runs": []}
        print(f"{name}: {result['status']}", file=sys.stderr, flush=True)
        out["queries"][name] = result
    with open(out_path, "w") as f:
        json.dump(out, f)
