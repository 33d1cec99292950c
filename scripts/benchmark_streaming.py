"""Benchmark: what counting costs over the plain simulation (streaming audits).

Prints, in one process on this machine (device kind and count first), for each case, the
runs per wall second of `advsim.simulate` (every score returned to the host and held) and
of `advsim.simulate_counts` with 6 thresholds (each chunk reduced on the device to 6
counts per world), alternating the two --repeats times after a warm-up call of each (so
compilation is excluded), and their ratio (target: counting >= 0.9 x simulate, i.e. at
most 10% over the plain simulation's time). The cases:

  - the 1-D linear process (`LinearProcess`, `ProjectionScore`) at T = 25, q = 0.01;
  - the threshold landscape's cell as the search builds it (`advsim.search.paper_start`,
    sigma = 4, B = 4, T = 25, the canary at step 1) with the Neyman-Pearson score of its
    exact law (`GridLikelihoodRatio`): the case the machine_found confirmation runs.

Usage: python scripts/benchmark_streaming.py [--trials 10000000] [--repeats 3] [--quick]
Figures are printed, never asserted: timings on shared machines are not tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import advsim  # noqa: E402
from advsim.adversaries import GridLikelihoodRatio, ProjectionScore  # noqa: E402
from advsim.exact import last_iterate_epsilon  # noqa: E402
from advsim.figures._tables_search import heatmap_cells  # noqa: E402
from advsim.mechanisms import LinearProcess  # noqa: E402
from advsim.search import config_from_mapping, paper_start  # noqa: E402

THRESHOLDS = [-3.0, -1.0, 0.0, 1.0, 3.0, 5.0]


def _cases():
    yield "linear T=25 q=0.01", LinearProcess(25, 0.01, 1.0), ProjectionScore()
    (_, table), = heatmap_cells(25, [4.0], [4], {"knots": 9})
    cfg = config_from_mapping({**table, "delta": 1e-5})
    mech = paper_start(cfg, "landscape")
    exact = last_iterate_epsilon(mech, 1e-5, progress=False)
    yield "landscape cell s4 b4 T=25", mech, GridLikelihoodRatio.from_exact(exact)


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000_000, help="runs per world")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10^6 runs, 2 repeats")
    args = parser.parse_args(argv)
    trials, repeats = (1_000_000, 2) if args.quick else (args.trials, args.repeats)
    print(f"devices: {jax.devices()}  load: {os.getloadavg()[0]:.1f}  runs per world: {trials}")
    print(f"{'case':<28} {'simulate runs/s':>16} {'count runs/s':>14} {'count / simulate':>17}")
    for name, mech, adv in _cases():
        def plain(mech=mech, adv=adv):
            advsim.simulate(mech, adv, trials, 0, progress=False)

        def count(mech=mech, adv=adv):
            advsim.simulate_counts(mech, adv, trials, 0, THRESHOLDS, progress=False)

        advsim.simulate(mech, adv, 20_000, 0, progress=False)  # compile both
        advsim.simulate_counts(mech, adv, 20_000, 0, THRESHOLDS, progress=False)
        t_plain, t_count = [], []
        for _ in range(repeats):
            t_plain.append(_time(plain))
            t_count.append(_time(count))
        sim, cnt = 2 * trials / statistics.median(t_plain), 2 * trials / statistics.median(t_count)
        print(f"{name:<28} {sim:>16.3e} {cnt:>14.3e} {cnt / sim:>17.3f}")
    print(f"load at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
