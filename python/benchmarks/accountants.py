"""PLD and RDP epsilon of DP-SGD (sigma = 1.1, q = 256/60000, delta = 1e-5) at T = 1e4 and 1e5,
timed, beside Google's dp_accounting when it is installed.

    python python/benchmarks/accountants.py
"""

import time

from dpml import accounting

SIGMA, Q, DELTA = 1.1, 256 / 60000, 1e-5


def timed(f):
    t = time.perf_counter()
    v = f()
    return v, time.perf_counter() - t


def dp_accounting_epsilons(steps):
    try:
        import dp_accounting
        from dp_accounting.pld import pld_privacy_accountant
        from dp_accounting.rdp import rdp_privacy_accountant
    except ImportError:
        return None
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(Q, dp_accounting.GaussianDpEvent(SIGMA)), steps
    )
    out = {}
    for name, make in (
        ("pld", lambda: pld_privacy_accountant.PLDAccountant()),
        ("rdp", lambda: rdp_privacy_accountant.RdpAccountant()),
    ):
        def run():
            a = make()
            a.compose(event)
            return a.get_epsilon(DELTA)

        out[name] = timed(run)
    return out


def main():
    print(f"sigma={SIGMA} q={Q:.6f} delta={DELTA}")
    for steps in (10_000, 100_000):
        event = accounting.dp_sgd_event(SIGMA, Q, steps)
        theirs = dp_accounting_epsilons(steps)
        for name in ("pld", "rdp"):
            eps, secs = timed(lambda: accounting.epsilon(event, DELTA, name))
            line = f"T={steps:>6} {name}: dpml eps={eps:.4f} in {secs:.3f} s"
            if theirs is not None:
                e2, s2 = theirs[name]
                line += (f"; dp_accounting eps={e2:.4f} in {s2:.3f} s "
                         f"(speed-up {s2 / secs:.1f}x, eps differs by {100 * (eps - e2) / e2:+.2f}%)")
            else:
                line += "; dp_accounting not installed"
            print(line)


if __name__ == "__main__":
    main()
