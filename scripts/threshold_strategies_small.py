"""The held-out threshold strategies on small samples: the measurement behind the default
rule (`advsim.audits.BySampleSize`) below 10^4 scores per world.

For each of the figure's six families (`advsim figure threshold_vs_jax_privacy`, which
measures 10^3, 10^4 and 10^5) and two mixtures with a weak tail (0.95 N(0, 1) +
0.05 N(3, 1) and 0.9 N(0, 1) + 0.1 N(2, 1) vs N(0, 1)), at N scores per world, prints the
median eps_lower of each held-out strategy over S score sets (the eps_delta audit, delta
1e-5, confidence 0.95, split seed = the set's index) and, after "z", the number of sets
where it is 0.

    python scripts/threshold_strategies_small.py 1000 40   # ~1 min on 2 cores
"""

import argparse

import numpy as np

from advsim.audits import audit
from advsim.figures._tables_threshold_strategies import FAMILIES, sample_scores

STRATEGIES = ("split", "multi_split", "projected_split", "rank_split")
MIXTURES = {"mix05_3": (0.05, 3.0), "mix10_2": (0.1, 2.0)}


def _mixture(rng: np.random.Generator, n: int, weight: float, mu: float):
    tail = rng.random(n) < weight
    x_in = np.where(tail, rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n))
    return x_in, rng.normal(0.0, 1.0, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("per_world", type=int, help="scores per world")
    parser.add_argument("sets", type=int, help="score sets per family")
    args = parser.parse_args()
    n = args.per_world
    for name in (*FAMILIES, *MIXTURES):
        values = {s: [] for s in STRATEGIES}
        for seed in range(args.sets):
            if name in FAMILIES:
                scores = sample_scores(name, n, seed)
                x_in, x_out = scores.canary_in, scores.canary_out
            else:
                x_in, x_out = _mixture(np.random.default_rng([seed, 99, n]), n, *MIXTURES[name])
            for s in STRATEGIES:
                r = audit(x_in, x_out, delta=1e-5, threshold_selection=s, seed=seed,
                          check_orientation=False)  # fmt: skip
                values[s].append(r.eps_lower or 0.0)
        cells = (
            f"{s} {np.median(v):.3f} z{int(np.sum(np.asarray(v) == 0))}"
            for s, v in values.items()
        )
        print(n, name, " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
