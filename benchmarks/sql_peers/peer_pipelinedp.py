"""PipelineDP (local backend) on the prepared queries.

PipelineDP has no SQL and no joins: every query is the pandas steps of queries.py, then one
``DPEngine.aggregate`` per released column, each with its own accountant holding that column's
share of epsilon as dpml splits it (MEAN splits its share evenly between count and sum, as
dpml's AVG does). Private keys: ``select_partitions`` with the selection share and all of delta
first, then the aggregates over the selected keys. Laplace noise; L0 =
max_partitions_contributed, L-infinity = max_contributions_per_partition; a per-unit sum bound
(q18) is PipelineDP's own min/max_sum_per_partition.
"""

import pipeline_dp

import queries as Q
from harness import main

METRIC = {
    "sum": pipeline_dp.Metrics.SUM,
    "avg": pipeline_dp.Metrics.MEAN,
    "count": pipeline_dp.Metrics.COUNT,
    "units": pipeline_dp.Metrics.PRIVACY_ID_COUNT,
}
RESULT = {"sum": "sum", "avg": "mean", "count": "count", "units": "privacy_id_count"}


def setup():
    return pipeline_dp.LocalBackend()


def engine(backend, epsilon, delta=0.0):
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=epsilon, total_delta=delta)
    return pipeline_dp.DPEngine(accountant, backend), accountant


def records(frame, query, column):
    cols = [Q.UNIT] + query.keys + ([column] if column else [])
    return list(frame[cols].itertuples(index=False, name=None))


def run(backend, query, frame, keys, plan):
    k = len(query.keys)
    partition = lambda r: Q.key_str(r[1 : 1 + k])  # noqa: E731
    if keys is None:
        dp, acc = engine(backend, plan["select_epsilon"], plan["delta"])
        params = pipeline_dp.SelectPartitionsParams(max_partitions_contributed=plan["l0"])
        extract = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0], partition_extractor=partition)
        selected = dp.select_partitions(records(frame, query, None), params, extract)
        acc.compute_budgets()
        keys = list(selected)
    else:
        keys = [Q.key_str(key) for key in keys]
    out = {key: {} for key in keys}
    for agg in query.aggs:
        dp, acc = engine(backend, plan["epsilon"][agg.name])
        params = dict(
            metrics=[METRIC[agg.kind]],
            noise_kind=pipeline_dp.NoiseKind.LAPLACE,
            max_partitions_contributed=plan["l0"],
            max_contributions_per_partition=plan["linf"],
        )
        if agg.sum_bounds:
            params.update(min_sum_per_partition=agg.sum_bounds[0],
                          max_sum_per_partition=agg.sum_bounds[1])
        elif agg.bounds:
            params.update(min_value=agg.bounds[0], max_value=agg.bounds[1])
        extract = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0], partition_extractor=partition,
            value_extractor=(lambda r: r[-1]) if agg.column else (lambda r: 0))
        result = dp.aggregate(records(frame, query, agg.column),
                              pipeline_dp.AggregateParams(**params), extract,
                              public_partitions=keys)
        acc.compute_budgets()
        for key, metrics in result:
            out[key][agg.name] = float(getattr(metrics, RESULT[agg.kind]))
    return out


if __name__ == "__main__":
    main(setup, run)
