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

With `--simulate`, the same Gaussian settings are run end to end instead: per seed, n fair
bits, scores x - mu / 2 with x ~ N(mu b, 1) (the sign is the optimal guess, |score| its
confidence), audited by advsim's own audits on the same scores:

- `snj`: `one_run_audit` as shipped (k+ and k- chosen by Bonferroni over its grid: SNJ with
  abstention); `snj_all`: the same without abstention (k+ = k- = n / 2, fixed);
- `order`: `one_run_order_audit` at r = n, fixed in advance (the paper's advice);
  `order_abstain`: the best of r = 10%, 25%, 50%, 100% of n, each at level 0.05 / 4
  (abstention chosen on the run, paid for by a union bound: Keinan, Shenfeld & Ligett,
  arXiv:2503.07199, applied to the order audit).

Adaptive guessing (their other remedy, against interference between canaries) cannot help
here: each canary's score depends on its own bit only, so its posterior given the scores
and the other bits is its posterior given its own score.

    python scripts/one_run_order_share.py --simulate 4   # 4 seeds, ~8 min on 2 cores
"""

import argparse

import numpy as np

from advsim.audits import (
    channel_epsilon,
    expected_mistakes,
    gaussian_channel,
    one_run_audit,
    one_run_epsilon,
    one_run_order_audit,
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


FRACTIONS = (0.1, 0.25, 0.5, 1.0)


def _simulated(mu: float, n: int, seed: int) -> dict[str, float]:
    """eps_lower of each audit on one simulated run of mu-GDP's Gaussian channel."""
    rng = np.random.default_rng(seed)
    included = rng.random(n) < 0.5
    scores = rng.normal(mu * included, 1.0) - mu / 2
    half = n // 2
    out = {
        "snj": one_run_audit(scores, included, delta=DELTA, coin_level=None).eps_lower,
        "snj_all": one_run_audit(scores, included, delta=DELTA, k_selection="fixed",
                                 k_plus=half, k_minus=n - half, coin_level=None).eps_lower,
        "order": one_run_order_audit(scores, included, delta=DELTA).eps_lower,
    }  # fmt: skip
    level = 0.05 / len(FRACTIONS)
    out["order_abstain"] = max(
        one_run_order_audit(scores, included, delta=DELTA, r=max(2, round(n * f)),
                            confidence=1.0 - level).eps_lower
        for f in FRACTIONS
    )  # fmt: skip
    return out


def simulate(seeds: int) -> None:
    for _, mu, q in SETTINGS:
        if q is not None:
            continue
        truth = channel_epsilon("gaussian", mu, DELTA)
        for n in (1_000, 10_000, 100_000):
            runs = [_simulated(mu, n, 1000 * seed + n) for seed in range(seeds)]
            shares = {k: np.mean([run[k] for run in runs]) / truth for k in runs[0]}
            print(f"gaussian mu={mu} true {truth:.4f} n={n:6d} ({seeds} runs): "
                  + "  ".join(f"{k} {v:.1%}" for k, v in shares.items()), flush=True)  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulate", type=int, metavar="SEEDS", default=0,
                        help="run the audits end to end on this many simulated runs")  # fmt: skip
    args = parser.parse_args()
    if args.simulate:
        simulate(args.simulate)
    else:
        main()
