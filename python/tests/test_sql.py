"""dpml.sql: a pyarrow table with its release facts, the same table as `dpml sql` for a seed,
explain without a charge, the ledger charged once, refusals and bad input as ValueError."""

import json
import pathlib

import pytest

import dpml

pa = pytest.importorskip("pyarrow")

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
TABLES = {"visits": EXAMPLES / "shop_visits.csv", "regions": EXAMPLES / "regions.csv"}
SCHEMA = EXAMPLES / "shop.toml"
QUERY = (
    "SELECT day, COUNT(*) AS visits, AVG(spend) AS avg_spend "
    "FROM visits GROUP BY day ORDER BY day"
)


def test_sql_returns_a_table_with_its_release_facts():
    t = dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, seed=1)
    assert isinstance(t, pa.Table)
    assert t.column_names == ["day", "visits", "avg_spend"]
    # Every declared day is released, in order.
    assert t.column("day").to_pylist() == list(range(1, 8))
    report = dpml.sql_report(t)
    assert report["epsilon"] == 1.0 and report["delta"] == 0.0
    assert report["neighbouring"] == "add or remove all rows of one privacy unit"
    names = [c["name"] for c in report["columns"]]
    assert names == ["visits", "avg_spend"]
    for c in report["columns"]:
        assert c["noise_scale"] > 0 and c["half_width_95"] > 0
    # A result read twice is the same.
    assert t.to_pylist() == t.to_pylist()


def test_python_and_the_cli_release_the_same_table_for_a_seed(dpml_cli):
    args = ["sql", QUERY, "--schema", SCHEMA, "--epsilon", "1", "--seed", "7"]
    for name, path in TABLES.items():
        args += ["--table", f"{name}={path}"]
    cli = dpml_cli(*args)
    py = dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, seed=7).to_pylist()
    assert len(cli["rows"]) == len(py) == 7
    for c, p in zip(cli["rows"], py):
        assert c["day"] == p["day"] and c["visits"] == p["visits"]
        # An average whose noisy count is not positive is released as null, by both.
        if c["avg_spend"] is None or p["avg_spend"] is None:
            assert c["avg_spend"] is None and p["avg_spend"] is None
        else:
            assert c["avg_spend"] == pytest.approx(p["avg_spend"], rel=1e-12)


def test_explain_reads_no_row_and_charges_nothing(tmp_path):
    ledger = dpml.Ledger(str(tmp_path / "b.ledger"), budget=2.0)
    e = dpml.sql_explain(
        "SELECT region, COUNT(*) FROM visits GROUP BY region", TABLES, SCHEMA, 1.0, delta=1e-6
    )
    assert e["explain"] is True
    threshold = e["aggregates"][0]["threshold"]
    assert threshold["tau"] > 1 and 0 < threshold["release_probability"][-1][1] <= 1
    assert ledger.balance()["entries"] == 0
    # sql() is a release: an EXPLAIN DP query is refused there, before the charge.
    with pytest.raises(ValueError, match="sql_explain"):
        dpml.sql("EXPLAIN DP SELECT COUNT(*) FROM visits", TABLES, SCHEMA, 1.0, ledger=ledger)
    assert ledger.balance()["entries"] == 0


def test_the_ledger_is_charged_once_and_refuses_an_overspend(tmp_path):
    path = tmp_path / "b.ledger"
    ledger = dpml.Ledger(str(path), budget=1.0)
    t = dpml.sql(QUERY, TABLES, SCHEMA, epsilon=0.6, ledger=ledger)
    assert t.num_rows == 7
    assert ledger.balance()["entries"] == 1
    with pytest.raises(ValueError, match="budget"):
        dpml.sql(QUERY, TABLES, SCHEMA, epsilon=0.6, ledger=ledger)
    assert ledger.balance()["entries"] == 1
    # A seeded run's noise is reproducible: it is refused a ledger, and nothing is charged.
    with pytest.raises(ValueError, match="seed=1 with ledger="):
        dpml.sql(QUERY, TABLES, SCHEMA, epsilon=0.1, ledger=ledger, seed=1)
    assert ledger.balance()["entries"] == 1


def test_refusals_and_bad_input_raise_value_error():
    with pytest.raises(ValueError, match="refused: .*window"):
        dpml.sql("SELECT SUM(spend) OVER () FROM visits", TABLES, SCHEMA, epsilon=1.0)
    with pytest.raises(ValueError, match="missing"):
        dpml.sql(QUERY, {"visits": EXAMPLES / "missing.csv"}, SCHEMA, epsilon=1.0)
    with pytest.raises(ValueError, match=r"sum\(Utf8\)"):
        dpml.sql("SELECT SUM(region) FROM visits", TABLES, SCHEMA, epsilon=1.0)
    with pytest.raises(ValueError, match="spent"):
        dpml.sql("SELECT SUM(spent) FROM visits", TABLES, SCHEMA, epsilon=1.0)
    # A schema that is not a regular file (a FIFO's read could wait for ever), and a query
    # too deep to plan (once a stack overflow that aborted the interpreter).
    with pytest.raises(ValueError, match="not a regular file"):
        dpml.sql(QUERY, TABLES, EXAMPLES, epsilon=1.0)
    deep = "SELECT COUNT(*) FROM visits WHERE spend < 1" + "+1" * 2000
    with pytest.raises(ValueError, match="operators and keywords"):
        dpml.sql(deep, TABLES, SCHEMA, epsilon=1.0)
    # Numbers are numbers: a text or a boolean is not read as one.
    with pytest.raises(ValueError, match="epsilon must be a real number, got '1'"):
        dpml.sql(QUERY, TABLES, SCHEMA, epsilon="1")
    with pytest.raises(ValueError, match="delta must be a real number, got True"):
        dpml.sql_explain(QUERY, TABLES, SCHEMA, epsilon=1.0, delta=True)
    with pytest.raises(ValueError, match=r"weights\['n'\] must be a real number"):
        dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, weights={"n": "2"})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"seed": -1}, r"seed must be in \[0, 2\*\*64\), got -1"),
        ({"seed": 2**64}, r"seed must be in \[0, 2\*\*64\), got 18446744073709551616"),
        ({"tables": [("visits", "v.csv")]}, r"tables must be a dict .*got \[\('visits'"),
        ({"tables": "v.csv"}, "tables must be a dict .*got 'v.csv'"),
        ({"tables": {"visits": 3}}, r"tables\['visits'\] must be a file path.*got 3"),
        ({"schema": None}, "schema must be a file path.*got None"),
        ({"weights": [("visits", 1.0)]}, r"weights must be a dict .*got \[\('visits'"),
    ],
)
def test_bad_arguments_are_named_in_one_line(kwargs, message):
    args = {"query": QUERY, "tables": TABLES, "schema": SCHEMA, "epsilon": 1.0, **kwargs}
    with pytest.raises(ValueError, match=message) as e:
        dpml.sql(**args)
    assert "\n" not in str(e.value)


def test_sql_report_refuses_what_dpml_sql_did_not_return():
    plain = pa.table({"a": [1]})
    for bad in [None, "x", plain, plain.replace_schema_metadata({b"other": b"{}"})]:
        with pytest.raises(ValueError, match="table must be a table returned by dpml.sql") as e:
            dpml.sql_report(bad)
        assert "\n" not in str(e.value)
    for report in [b"[" * 100_000, b"not json", b"[1]", b"\xff"]:
        forged = plain.replace_schema_metadata({b"dpml": report})
        with pytest.raises(ValueError, match='table\'s b"dpml" metadata is not the report'):
            dpml.sql_report(forged)


def test_a_memory_limit_gives_the_same_seeded_table_and_bad_limits_raise():
    free = dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, seed=3)
    limited = dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, seed=3, memory_limit="16M")
    assert limited.to_pylist() == free.to_pylist()
    assert dpml.sql_report(limited)["memory_limit"] == 16 << 20
    assert dpml.sql_report(free)["memory_limit"] is None
    as_bytes = dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, seed=3, memory_limit=16 << 20)
    assert as_bytes.to_pylist() == free.to_pylist()
    explained = dpml.sql_explain(QUERY, TABLES, SCHEMA, epsilon=1.0, memory_limit="1G")
    assert explained["explain"] is True
    # As `dpml sql --explain --json`: the setup the query would run under.
    assert explained["memory_limit"] == 1 << 30
    assert explained["cluster"] is None
    for bad in ["4X", "0", "-1G", "1000"]:
        with pytest.raises(ValueError, match="memory limit"):
            dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, memory_limit=bad)
    with pytest.raises(TypeError, match="memory_limit"):
        dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, memory_limit=4.5)


def test_a_cluster_out_of_reach_raises_before_the_charge(tmp_path):
    import socket

    # A port nothing listens on: bound, then closed.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ledger = dpml.Ledger(str(tmp_path / "c.ledger"), budget=5.0)
    address = f"127.0.0.1:{port}"
    with pytest.raises(ValueError, match=f"the cluster at {address} failed the query"):
        dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, ledger=ledger, cluster=address)
    assert ledger.balance()["entries"] == 0
    with pytest.raises(ValueError, match="HOST:PORT"):
        dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, cluster="no port")
    with pytest.raises(ValueError, match="memory_limit cannot be combined with cluster"):
        dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, cluster=address, memory_limit="1G")
    with pytest.raises(TypeError, match="cluster"):
        dpml.sql(QUERY, TABLES, SCHEMA, epsilon=1.0, cluster=50050)  # type: ignore[arg-type]
