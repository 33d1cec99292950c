"""How often the family audit's assumption test rejects scores that are in the family.

The linear process with the projection adversary is in the heuristic's family exactly, so
every rejection of `heuristic_family` (tested at level 0.05 on the counted runs) is a false
alarm. Prints the share of score sets with a rejection, under the default strategy and
under "split" (the same scores and seeds).

    python scripts/assumption_false_alarms.py --steps 20 --noise-multiplier 1 \
        --trials 20000 --sets 800
(800 sets: about 5 minutes on 2 cores; it printed 23/800 under the default and 18/800 under
"split", and 7/200 and 2/200 for the first 200 sets.)
"""

from __future__ import annotations

import argparse
import warnings

import jax

import advsim
from advsim.adversaries import ProjectionScore
from advsim.audits import AssumptionRejectedWarning, audit
from advsim.mechanisms import LinearProcess


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--sampling-prob", type=float, default=0.1)
    parser.add_argument("--noise-multiplier", type=float, default=1.0)
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--sets", type=int, default=800)
    args = parser.parse_args()
    mech = LinearProcess(args.steps, args.sampling_prob, args.noise_multiplier)
    rejected = {"by_sample_size": 0, "split": 0}
    for s in range(args.sets):
        scores = advsim.simulate(mech, ProjectionScore(), args.trials, jax.random.key(s))
        for selection in rejected:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AssumptionRejectedWarning)
                r = audit(scores, "family", delta=1e-5, accounting=mech.accounting(),
                          threshold_selection=selection, seed=s)  # fmt: skip
            rejected[selection] += bool(r.assumption_rejected)
    for selection, count in rejected.items():
        print(f"{selection}: {count}/{args.sets} rejected ({count / args.sets:.4f}; level 0.05)")


if __name__ == "__main__":
    main()
