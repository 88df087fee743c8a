"""5-fold accuracy of ``DPMLPClassifier(epsilon=3)`` on breast-cancer beside the command line's
``dpml train --dataset breast-cancer --model mlp --epsilon 3 --folds 5``, over a few seeds.

Both train the same recipe (an MLP with 32 hidden units, batch 64, learning rate 0.5, 30 epochs,
clipping norm 1, epsilon 3 per model at delta 1e-5) on the same 569 records (scikit-learn's copy
of the Wisconsin diagnostic data, which dpml embeds), with the features scaled from the same
published per-feature bounds (read from the command line's JSON: public constants, not the
data). The folds differ (each front draws its own), so the comparison is of means over seeds.
Needs scikit-learn and the dpml binary (``DPML_BIN``, else target/release or target/debug).

    python python/benchmarks/breast_cancer.py [SEEDS]
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys

from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import KFold, cross_val_score

from dpml.learn import DPMLPClassifier

ROOT = pathlib.Path(__file__).resolve().parents[2]


def binary():
    explicit = os.environ.get("DPML_BIN")
    if explicit:
        return explicit
    for profile in ("release", "debug"):
        p = ROOT / "target" / profile / "dpml"
        if p.exists():
            return str(p)
    sys.exit("no dpml binary: cargo build --release -p dpml, or set DPML_BIN")


def cli(seed):
    out = subprocess.run(
        [binary(), "--json", "train", "--dataset", "breast-cancer", "--model", "mlp",
         "--epsilon", "3", "--folds", "5", "--seed", str(seed)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


def main():
    seeds = range(1, 1 + int(sys.argv[1] if len(sys.argv) > 1 else 3))
    x, y = load_breast_cancer(return_X_y=True)
    cli_means, py_means, bounds = [], [], None
    for seed in seeds:
        r = cli(seed)
        cli_means.append(r["diagnostics"]["test_accuracy_mean"])
        bounds = [tuple(b) for b in r["normalize"]["ranges"]]
        est = DPMLPClassifier(epsilon=3.0, bounds=bounds, classes=[0, 1], random_state=seed)
        folds = KFold(5, shuffle=True, random_state=seed)
        py_means.append(float(cross_val_score(est, x, y, cv=folds).mean()))
        print(f"seed {seed}: cli {cli_means[-1]:.4f}  python {py_means[-1]:.4f}", flush=True)
    for name, m in (("dpml train --folds 5", cli_means), ("DPMLPClassifier 5-fold", py_means)):
        sd = statistics.stdev(m) if len(m) > 1 else 0.0
        print(f"{name}: mean accuracy {statistics.mean(m):.4f} (sd {sd:.4f} over {len(m)} seeds)")


if __name__ == "__main__":
    main()
