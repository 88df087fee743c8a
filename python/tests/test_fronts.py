"""One product, two fronts: the same recipe run from Python and from the command line gives
the same JSON field names and the same defaults. Both fronts take their recipes, defaults and
release fields from dpml-core, so a difference here is a drift to fix there."""

import numpy as np
import pytest

import dpml
from dpml import accounting, learn

# Added by the command line to every result: the version and the command typed.
ENVELOPE = {"command", "dpml_version"}


@pytest.fixture()
def table(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.0, 1.0, (300, 3))
    y = (x[:, 0] + x[:, 1] > 1.0).astype(int)
    csv = tmp_path / "table.csv"
    rows = "\n".join(f"{a},{b},{c},{label}" for (a, b, c), label in zip(x, y))
    csv.write_text("a,b,c,label\n" + rows + "\n")
    return x, y, f"csv:{csv}"


def test_dpsgd_from_python_and_from_the_command_line(dpml_cli, table):
    x, y, dataset = table
    cli = dpml_cli("train", "--dataset", dataset, "--bounds", "0,1", "--classes", "0,1",
                   "--epsilon", 2, "--seed", 1)
    py = learn.DPMLPClassifier(epsilon=2, bounds=(0, 1), classes=[0, 1], random_state=1).fit(x, y)
    r = py.privacy_report_
    assert set(r) == set(cli) - ENVELOPE
    # Every default neither front was given: the table recipe, the accountant, the noise.
    assert r["recipe"] == cli["recipe"]
    for key in ("model", "epochs", "batch_size", "learning_rate", "max_grad_norm", "delta",
                "accountant", "bounds", "exact_noise", "task", "neighbouring", "public", "schema"):
        assert r[key] == cli[key], key
    assert set(r["diagnostics"]) - {"epoch_log"} <= set(cli["diagnostics"])
    table_defaults = learn.DEFAULTS["table"]
    assert cli["epochs"] == table_defaults["epochs"]
    assert cli["batch_size"] == table_defaults["batch_size"]
    assert cli["recipe"]["hidden"] == table_defaults["hidden"]


def test_a_charged_fit_reads_the_same_in_both_fronts_ledgers(dpml_cli, table, tmp_path):
    x, y, dataset = table
    cli_ledger = tmp_path / "cli.db"
    cli = dpml_cli("train", "--dataset", dataset, "--bounds", "0,1", "--classes", "0,1",
                   "--epsilon", 2, "--epochs", 1, "--ledger", cli_ledger, "--budget", 5)
    ledger = dpml.Ledger(tmp_path / "py.db", budget=5)
    py = learn.DPMLPClassifier(epsilon=2, epochs=1, bounds=(0, 1), classes=[0, 1],
                               ledger=ledger).fit(x, y)
    assert set(py.privacy_report_["ledger"]) == set(cli["ledger"])
    (shown,) = dpml_cli("ledger", "show", "--ledger", cli_ledger)["entries"]
    (entry,) = ledger.entries()
    assert set(shown) == set(entry)
    assert shown["command"] == entry["command"] == "train"
    assert shown["event"]["type"] == entry["event"]["type"]


def test_label_dp_from_python_and_from_the_command_line(dpml_cli, table):
    x, y, dataset = table
    cli = dpml_cli("label-dp", "--dataset", dataset, "--classes", "0,1", "--epsilon",
                   learn.DEFAULTS["label_dp"]["epsilon"], "--epochs", 2, "--seed", 1)
    py = learn.LabelDPClassifier(classes=[0, 1], epochs=2, random_state=1).fit(x, y)
    r = py.privacy_report_
    # The command line also says how its test split was cut.
    assert set(r) == set(cli) - ENVELOPE - {"test_split", "split_key"}
    for key in ("mechanism", "epsilon", "delta", "stages", "top_k_rule", "model", "learning_rate",
                "ema", "guarantee", "neighbouring", "public"):
        assert r[key] == cli[key], key


def test_kmeans_from_python_and_from_the_command_line(dpml_cli, table):
    x, _, dataset = table
    cli = dpml_cli("kmeans", "--dataset", dataset, "--bounds", "0,1", "--epsilon", 1, "--seed", 1)
    py = learn.DPKMeans(epsilon=1, bounds=(0, 1), random_state=1).fit(x)
    r = py.privacy_report_
    assert set(r) == set(cli) - ENVELOPE
    for key in ("algorithm", "k", "iterations", "budget_split", "bounds", "epsilon", "delta"):
        assert r[key] == cli[key], key
    # The command line also scores the clusters against the labels it has.
    assert set(r["diagnostics"]) == set(cli["diagnostics"]) - {"accuracy"}


def test_calibration_from_python_and_from_the_command_line(dpml_cli):
    q, steps = 256 / 60000, 14063
    cli = dpml_cli("calibrate", "--epsilon", 3, "--delta", 1e-5, "--sampling-rate", q,
                   "--steps", steps)
    # One default accountant, the tight one (RDP's sigma is larger for the same target).
    assert cli["accountant"] == learn.DEFAULTS["calibration_accountant"] == "pld"
    sigma = accounting.calibrate(3.0, 1e-5, q, steps=steps)
    assert sigma == pytest.approx(cli["noise_multiplier"], rel=1e-12)
    assert accounting.calibrate(3.0, 1e-5, q, steps=steps, accountant="rdp") > sigma


def test_counts_and_seeds_out_of_range_are_value_errors_naming_the_argument():
    from dpml import mechanisms

    with pytest.raises(ValueError, match="sensitivity"):
        mechanisms.discrete_laplace([1, 2], -1, 1.0)
    with pytest.raises(ValueError, match="categories"):
        mechanisms.randomized_response([0, 1], 1.0, -2)
    with pytest.raises(ValueError, match="seed"):
        mechanisms.laplace([1.0], 1.0, 1.0, seed=-1)
    x = np.zeros((20, 2))
    y = np.arange(20) % 2
    for sizes, words in [([-1], "hidden_layer_sizes"), ([10**6], "at most 65536")]:
        est = learn.DPMLPClassifier(
            epsilon=1.0, bounds=(0, 1), classes=[0, 1], epochs=1, hidden_layer_sizes=sizes
        )
        with pytest.raises(ValueError, match=words):
            est.fit(x, y)
    est = learn.DPLogisticRegression(
        epsilon=1.0, bounds=(0, 1), classes=[0, 1], epochs=1, random_state=1.5
    )
    with pytest.raises(ValueError, match="random_state"):
        est.fit(x, y)
