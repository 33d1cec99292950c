"""The default strategy's rule, read on score families it was not chosen on.

`advsim.audits.BySampleSize` (the default of `audit`, `run_audit`, sweeps and the CLI)
runs `RankSplit()` (planning share 0.1) from 3 scores per world. This script runs it
beside other planning shares and strategies on families outside the threshold figure's
six, with jax_privacy's default (`epsilon_clopper_pearson(0.05, 1e-5)`: Bonferroni over
its hull thresholds, one-sided) on the same scores, and prints per family the median
`eps_lower` (the eps_delta audit, delta 1e-5, confidence 0.95), the number of score sets
at 0, and the median per-set ratio over jax_privacy's default. Score set i is drawn from a
generator seeded (i, family code, n) and split with seed i, as in the figure.

    python scripts/threshold_default_heldout.py --per-world 1000 --sets 600
    python scripts/threshold_default_heldout.py --per-world 10000 --sets 200 \
        --strategies rank0.1,rank0.2,proj0.15
(1000 per world, 600 sets, the three families: about 4 minutes on 2 cores.)
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from advsim import Scores
from advsim.audits import (
    AssumptionRejectedWarning,
    BySampleSize,
    ProjectedSplit,
    RankSplit,
    Split,
    audit,
)

#: Families outside the threshold figure's: (seed code, description, sampler).
FAMILIES = {
    "logistic": (8, "Logistic(1, 1) vs Logistic(0, 1)",
                 lambda rng, n: (rng.logistic(1.0, 1.0, n), rng.logistic(0.0, 1.0, n))),
    "gumbel": (9, "Gumbel(0.75, 1) vs Gumbel(0, 1)",
               lambda rng, n: (rng.gumbel(0.75, 1.0, n), rng.gumbel(0.0, 1.0, n))),
    "poisson": (10, "Poisson(12) vs Poisson(10)",
                lambda rng, n: (rng.poisson(12.0, n).astype(float),
                                rng.poisson(10.0, n).astype(float))),
}  # fmt: skip


def strategy(name: str):
    """"default", "rankF", "projF" or "splitF" (F the planning or choosing share)."""
    if name == "default":
        return BySampleSize()
    for prefix, cls in (("rank", RankSplit), ("proj", ProjectedSplit), ("split", Split)):
        if name.startswith(prefix):
            return cls(float(name[len(prefix):]))
    raise SystemExit(f"--strategies: unknown {name!r} (default, rankF, projF, splitF)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-world", type=int, default=1000)
    parser.add_argument("--sets", type=int, default=600)
    parser.add_argument(
        "--strategies", default="default,rank0.05,rank0.2,rank0.3,proj0.15,split0.5"
    )
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()
    from jax_privacy import auditing  # a test dependency of advsim

    names = args.strategies.split(",")
    warnings.simplefilter("ignore", AssumptionRejectedWarning)
    for family in args.families.split(","):
        code, description, draw = FAMILIES[family]
        start = time.perf_counter()
        values = {name: [] for name in names}
        theirs = []
        for i in range(args.sets):
            scores = Scores(*draw(np.random.default_rng([i, code, args.per_world]),
                                  args.per_world))  # fmt: skip
            for name in names:
                r = audit(scores, "eps_delta", delta=1e-5, confidence=0.95,
                          threshold_selection=strategy(name), seed=i)  # fmt: skip
                values[name].append(0.0 if r.eps_lower is None else r.eps_lower)
            jp = auditing.CanaryScoreAuditor(np.asarray(scores.canary_in),
                                             np.asarray(scores.canary_out))  # fmt: skip
            theirs.append(float(jp.epsilon_clopper_pearson(0.05, 1e-5)))
        theirs = np.asarray(theirs)
        print(f"{description}, {args.per_world} per world, {args.sets} sets "
              f"({time.perf_counter() - start:.0f} s); jax_privacy default median "
              f"{np.median(theirs):.3f}")  # fmt: skip
        for name in names:
            v = np.asarray(values[name])
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.median(np.where(theirs > 0, v / theirs, np.nan)[theirs > 0])
            print(f"  {name:<10} median {np.median(v):.3f}, {int(np.sum(v == 0)):>3} at 0, "
                  f"median ratio over jax_privacy's default {ratio:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
