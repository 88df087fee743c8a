"""Run the TPC-H DP queries through dpml and its peers and print one table.

Called by run.sh (which makes the environments). For each query of benchmarks/sql/ it asks
dpml for its plan (``dpml sql --explain --json``: the contribution bounds L0 and L-infinity and
the split of epsilon), computes the exact answer with pandas (a diagnostic: it is what the
errors are measured against, and it is never released), runs dpml R times, then hands the
same bounds and budget to each peer's runner in that peer's own environment.
"""

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

import queries as Q

HERE = os.path.dirname(os.path.abspath(__file__))
SQL_DIR = os.path.join(HERE, "..", "sql")
TABLES = ["customer", "orders", "lineitem", "supplier", "nation", "region", "part", "partsupp"]
PEERS = {"tumult": "Tumult Analytics", "pipelinedp": "PipelineDP", "smartnoise": "SmartNoise SQL"}


def sql_text(name):
    with open(os.path.join(SQL_DIR, f"{name}.sql")) as f:
        return f.read()


def dpml(args, name, *extra):
    tables = [a for t in TABLES if os.path.exists(f"{args.data}/{t}.parquet")
              for a in ("--table", f"{t}={args.data}/{t}.parquet")]
    cmd = [args.dpml, "sql", *tables, "--schema", f"{args.data}/schema.toml",
           "--epsilon", str(args.epsilon), "--delta", str(args.delta), "--json", *extra,
           "--", sql_text(name)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    out = json.loads(done.stdout) if done.stdout.strip() else {}
    if done.returncode != 0 or "error" in out:
        raise RuntimeError(out.get("error", {}).get("message") or done.stderr.strip()[-300:])
    return out, seconds


def plan_of(args, name):
    """dpml's own bounds and epsilon split for one query, read from --explain --json."""
    report, _ = dpml(args, name, "--explain")
    [agg] = report["aggregates"]
    eps = {c["name"]: c["epsilon"] for c in report["columns"]}
    return {
        "l0": agg["max_groups_per_unit"],
        "linf": agg["max_rows_per_unit_per_group"],
        "epsilon": eps,
        "select_epsilon": report["epsilon"] - sum(eps.values()),
        "delta": report["delta"],
        "private_keys": agg.get("threshold") is not None,
    }


def relative_errors(query, exact, rows):
    """|released - exact| / |exact| for every cell of the exact answer with exact != 0; a cell
    that is not released (its key was not selected, or its value is null) counts as 1."""
    errs, missing = [], 0
    for key, cols in exact.items():
        got = rows.get(key, {})
        for a in query.aggs:
            e = cols[a.name]
            if e != e or e == 0:
                continue
            r = got.get(a.name)
            missing += r is None or r != r
            errs.append(1.0 if r is None or r != r else abs(r - e) / abs(e))
    return errs, missing


def summarize(query, exact, runs):
    per_run = [relative_errors(query, exact, run["rows"]) for run in runs]
    errs = [e for run_errs, _ in per_run for e in run_errs]
    secs = [run["seconds"] for run in runs]
    return {
        "seconds": statistics.median(secs),
        "dp_seconds": statistics.median(run.get("dp_seconds", run["seconds"]) for run in runs),
        "median_relative_error": statistics.median(errs) if errs else None,
        "runs": len(runs),
        "cells": len(errs),
        "cells_not_released": sum(m for _, m in per_run),
        "run_errors": [run_errs for run_errs, _ in per_run],
    }


def error_ratio(dpml_runs, peer_runs, resamples=2000):
    """dpml's median relative error over the peer's, with a 95% bootstrap interval.

    The runs are the independent draws (the cells of one run share its bounding), so each
    system's runs are resampled with replacement, the errors of the resampled runs pooled, and
    the ratio of the two medians taken; the interval is the 2.5th and 97.5th percentile of those
    ratios. Seeded: the same report prints the same interval. None where a side has no error.
    """
    def median_of(runs):
        errs = [e for run in runs for e in run]
        return statistics.median(errs) if errs else None

    whole = (median_of(dpml_runs), median_of(peer_runs))
    if None in whole or whole[1] == 0:
        return None
    rng = random.Random(0)
    ratios = []
    for _ in range(resamples):
        d = median_of(rng.choices(dpml_runs, k=len(dpml_runs)))
        p = median_of(rng.choices(peer_runs, k=len(peer_runs)))
        if d is not None and p:
            ratios.append(d / p)
    ratios.sort()
    lo, hi = ratios[int(0.025 * len(ratios))], ratios[int(0.975 * len(ratios)) - 1]
    return whole[0] / whole[1], lo, hi


def rows_by_key(query, rows):
    return {Q.key_str(tuple(r[k] for k in query.keys)): r for r in rows}


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": model, "nproc": os.cpu_count(), "python": platform.python_version(),
            "load_average_1m": os.getloadavg()[0]}


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dpml")
    p.add_argument("--venv")
    p.add_argument("--json", dest="json_out")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--queries", default=",".join(sorted(
        f[:-4] for f in os.listdir(SQL_DIR) if f.endswith(".sql"))))
    p.add_argument("--peers", default=",".join(PEERS))
    p.add_argument("--scale-factor", default="?")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per peer, all queries")
    p.add_argument("--max-seconds", type=float, default=300,
                   help="a peer starts no further run of a query after this many seconds on it")
    p.add_argument("--from-json", help="print the table of a saved --json report and exit")
    args = p.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            report = json.load(f)
        qs = Q.queries(Q.load_schema(f"{report['data']}/schema.toml"))
        print_table(report, ["dpml"] + [s for s in PEERS if s in report["setup_seconds"]], qs)
        return
    if not (args.data and args.dpml and args.venv):
        p.error("--data, --dpml and --venv are needed (run.sh passes the last two)")
    if not os.path.isfile(f"{args.data}/schema.toml"):
        fail(f"--data '{args.data}' holds no schema.toml (TPC-H Parquet files and the DP "
             "schema, as `dpml bench sql` writes them)")
    names = args.queries.split(",")
    peers = [p for p in args.peers.split(",") if p]
    for bad in [n for n in names if n not in Q.queries(Q.load_schema(f"{args.data}/schema.toml"))] \
            + [p for p in peers if p not in PEERS]:
        fail(f"unknown query or peer '{bad}'")
    schema = Q.load_schema(f"{args.data}/schema.toml")
    qs = Q.queries(schema)

    results = {}  # query -> system -> summary
    plans, exacts = {}, {}
    for name in names:
        query = qs[name]
        print(f"{name}: exact answer and dpml", file=sys.stderr, flush=True)
        plans[name] = plan_of(args, name)
        frame = query.prepare(Q.load(args.data, query), schema)
        exacts[name] = Q.exact(query, frame)
        runs = []
        try:
            for _ in range(args.runs):
                out, seconds = dpml(args, name)
                runs.append({"seconds": seconds, "rows": rows_by_key(query, out["rows"])})
            results[name] = {"dpml": dict(summarize(query, exacts[name], runs), status="ok")}
        except RuntimeError as e:
            results[name] = {"dpml": {"status": "error", "reason": str(e)}}

    setup = {}
    with tempfile.TemporaryDirectory() as tmp:
        plan_path = os.path.join(tmp, "plan.json")
        with open(plan_path, "w") as f:
            json.dump({"data": args.data, "schema": f"{args.data}/schema.toml", "runs": args.runs,
                       "max_seconds": args.max_seconds, "queries": plans}, f)
        for peer in peers:
            out_path = os.path.join(tmp, f"{peer}.json")
            python = os.path.join(args.venv, peer, "bin", "python")
            print(f"{PEERS[peer]}:", file=sys.stderr, flush=True)
            failure = None
            if not os.path.exists(python):
                failure = f"not installed (see {args.venv}/{peer}.install.log)"
            else:
                try:
                    done = subprocess.run([python, os.path.join(HERE, f"peer_{peer}.py"),
                                           plan_path, out_path], timeout=args.timeout)
                    if done.returncode != 0 or not os.path.exists(out_path):
                        failure = f"runner failed (exit {done.returncode})"
                except subprocess.TimeoutExpired:
                    failure = f"runner timed out after {args.timeout} s"
            if failure:
                for name in names:
                    results[name][peer] = {"status": "error", "reason": failure}
                continue
            with open(out_path) as f:
                out = json.load(f)
            setup[peer] = out["setup_seconds"]
            for name in names:
                r = out["queries"][name]
                if r["status"] == "ok":
                    runs = [{"seconds": run["seconds"], "dp_seconds": run["dp_seconds"],
                             "rows": {tuple(k): v for k, v in run["rows"]}} for run in r["runs"]]
                    results[name][peer] = dict(summarize(qs[name], exacts[name], runs),
                                               status="ok")
                else:
                    results[name][peer] = {"status": r["status"], "reason": r["reason"]}

    report = {"machine": machine(), "data": args.data, "scale_factor": args.scale_factor,
              "runs": args.runs,
              "epsilon": args.epsilon, "delta": args.delta, "plans": plans,
              "setup_seconds": setup, "queries": results}
    print_table(report, ["dpml"] + peers, qs)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=1)


SYSTEM_NOTES = {
    "dpml": "the SQL of benchmarks/sql/ as written",
    "tumult": "Spark local mode, ID = customer (AddRowsWithID); one evaluate() per column; "
              "private keys: get_groups",
    "pipelinedp": "no SQL; one aggregate() per column, each with its own accountant; "
                  "private keys: select_partitions",
    "smartnoise": "a generated SELECT ... GROUP BY over the prepared rows; max_ids = L0 x Linf; "
                  "the same epsilon on each statistic, scaled so that its accountant reports "
                  "the query's epsilon",
}


def rewrites(query):
    """What the peers could not do themselves in this query, in words (the notes column)."""
    notes = [f"all peers: {query.steps}"] if query.steps else []
    if len(query.keys) > 1:
        notes.append("Tumult: one combined key column")
    if query.public_keys and query.keys:
        notes.append("SmartNoise: no public key sets, keys thresholded")
    if any(a.sum_bounds for a in query.aggs):
        notes.append("Tumult, SmartNoise: no per-unit sum bound, per-customer totals clamped "
                     "in pandas")
    return "; ".join(notes)


def cell(r, runs, dpml_result=None):
    if r["status"] != "ok":
        return "FAILED: " + r["reason"].split(". ")[0]
    err = r["median_relative_error"]
    text = f"{r['seconds']:.2f} s, err " + (f"{err:.3g}" if err is not None else "n/a")
    ratio = (error_ratio(dpml_result["run_errors"], r["run_errors"])
             if dpml_result and dpml_result.get("status") == "ok" and "run_errors" in r
             and "run_errors" in dpml_result else None)
    if ratio:
        text += f", dpml/this {ratio[0]:.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}]"
    if r["runs"] < runs:
        text += f" ({r['runs']} run{'s' if r['runs'] > 1 else ''})"
    if r["cells_not_released"]:
        text += f" ({r['cells_not_released']}/{r['cells']} cells not released)"
    return text


def print_table(report, systems, qs):
    m = report["machine"]
    print(f"TPC-H scale factor {report['scale_factor']}, epsilon = {report['epsilon']}, "
          f"delta = {report['delta']}, median of {report['runs']} runs; "
          f"{m['cpu']}, nproc = {m['nproc']}, load average at start {m['load_average_1m']:.1f}")
    print("time: seconds per query (dpml: the whole CLI process; peers: Parquet read + pandas "
          "steps + DP, in a started interpreter); err: median relative error of the released "
          "cells against the exact answer (a cell not released counts as 1); dpml/this: dpml's "
          "err over the peer's, with a 95% bootstrap interval over the runs (below 1: dpml's "
          "error is lower)\n")
    names = {"dpml": "dpml", **PEERS}
    lines = [["query"] + [names[s] for s in systems] + ["what the peers needed"]]
    lines.append(["---"] * len(lines[0]))
    for q, res in report["queries"].items():
        mine = res.get("dpml")
        lines.append([q] + [cell(res.get(s, {"status": "error", "reason": "not run"}),
                                 report["runs"], mine if s != "dpml" else None)
                            for s in systems] + [rewrites(qs[q])])
    for line in lines:
        print("| " + " | ".join(line) + " |")
    print()
    for s in systems:
        print(f"- {names[s]}: {SYSTEM_NOTES[s]}")
    if report["setup_seconds"]:
        print("\nstart-up, once per peer (not in the times above): " + ", ".join(
            f"{PEERS[p]} {s:.1f} s" for p, s in report["setup_seconds"].items()))


if __name__ == "__main__":
    main()
