"""The share of the true epsilon that one-run audits recover, on the settings of Xiang et
al. (arXiv:2509.08704, their `compare/RESULTS.txt`): Gaussian mu-GDP at mu = 0.5, 1, 2 and
one step of the Poisson-subsampled Gaussian (mu = 1, q = 0.5; mu = 2, q = 0.2), n = 10^3,
10^4, 10^5 canaries, r = 10%, 25%, 50%, 100% of them released, delta 1e-5, confidence
0.95. Each audit sees the mistakes a typical run makes, u = round(E[T]) under the true
channel (`advsim.audits.expected_mistakes`), as in that file.

Prints, per setting, Steinke-Nasr-Jagielski's bound (`advsim.audits.one_run_epsilon`,
v = r - u correct guesses) and the order-statistics bound
(`advsim.audits.one_run_order_epsilon`), each as a share of the true eps, and the means.

    python scripts/one_run_order_share.py   # ~1 min on 2 cores
"""

import numpy as np

from advsim.audits import (
    channel_epsilon,
    expected_mistakes,
    gaussian_channel,
    one_run_epsilon,
    one_run_order_epsilon,
    subsampled_gaussian_channel,
)

DELTA = 1e-5
SETTINGS = [("gaussian", 0.5, None), ("gaussian", 1.0, None), ("gaussian", 2.0, None),
            ("subsampled_gaussian", 1.0, 0.5), ("subsampled_gaussian", 2.0, 0.2)]  # fmt: skip


def main() -> None:
    shares = {"snj": [], "order": []}
    for family, mu, q in SETTINGS:
        channel = gaussian_channel(mu) if q is None else subsampled_gaussian_channel(mu, q)
        truth = channel_epsilon(family, mu, DELTA, q)
        for n in (1_000, 10_000, 100_000):
            for fraction in (0.1, 0.25, 0.5, 1.0):
                r = max(2, round(n * fraction))
                u = round(expected_mistakes(channel, n, r))
                snj = one_run_epsilon(n, r, r - u, delta=DELTA, level=0.05)
                order, _ = one_run_order_epsilon(n, r, u, delta=DELTA, family=family,
                                                 sampling_prob=q)  # fmt: skip
                shares["snj"].append(snj / truth)
                shares["order"].append(order / truth)
                print(f"{family:20s} mu={mu} q={q} true {truth:.4f} n={n:6d} r={r:6d} u={u:5d}"
                      f"  SNJ {snj:.4f} ({snj / truth:.1%})  order {order:.4f} "
                      f"({order / truth:.1%})", flush=True)  # fmt: skip
    for name, values in shares.items():
        print(f"{name}: mean share {np.mean(values):.1%}, median {np.median(values):.1%}")


if __name__ == "__main__":
    main()
