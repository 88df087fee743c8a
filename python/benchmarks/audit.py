"""The score audit (ROC, AUC, TPR at low FPR, Clopper-Pearson epsilon lower bound) on 1e6
scores (5e5 members, 5e5 non-members), timed.

    python python/benchmarks/audit.py
"""

import time

import numpy as np

from dpml import audit


def main():
    rng = np.random.default_rng(0)
    members = rng.normal(0.5, 1.0, 500_000)
    non = rng.normal(0.0, 1.0, 500_000)
    t = time.perf_counter()
    r = audit.audit_scores(members, non, delta=1e-5, confidence=0.95, seed=1)
    secs = time.perf_counter() - t
    print(f"1e6 scores: auc={r.auc:.4f} advantage={r.advantage:.4f} "
          f"eps_lower_bound={r.epsilon_lower_bound:.4f} in {secs:.3f} s")


if __name__ == "__main__":
    main()
