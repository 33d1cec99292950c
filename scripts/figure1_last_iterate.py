"""Figure 1 of the last-iterate paper: heuristic vs composition vs full batch over T.

Steinke et al., "The Last Iterate Advantage", arXiv:2410.06186, Figure 1: epsilon at
delta = 1e-6 of the last-iterate heuristic (Theorem 1), the composition bound (every
iterate released) and full-batch DP-GD (Appendix B) against the number of steps T, in three
parameter regimes (see scripts/configs/figure1_last_iterate.toml for the regimes and why).
Bounds only, no simulation: a bounds-mode sweep (`advsim.sweep`), then one panel per regime
(`advsim.plotting.plot_eps_vs_steps_panels`). Resumable: rerun to finish a killed run.

    python scripts/figure1_last_iterate.py --quick   # 7-8 values of T per panel, < 1 min
    python scripts/figure1_last_iterate.py           # the config's full T grid, ~2 min

Writes `<out>/figure1.png` and `.pdf` beside the sweep's table (`results.csv`).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from advsim.plotting import plot_eps_vs_steps_panels
from advsim.sweep import parse_config, run_sweep

CONFIG = Path(__file__).resolve().parent / "configs" / "figure1_last_iterate.toml"
#: --quick keeps these T (where a panel's grid has them): ends, the dip of panel (c), decades.
QUICK_STEPS = (1, 3, 10, 20, 100, 300, 1000, 10000)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer T per panel (< 1 minute)")
    parser.add_argument("--out", default=None,
                        help="output folder (default advsim-results/figure1[-quick])")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    out = Path(args.out or ("advsim-results/figure1" + ("-quick" if args.quick else "")))

    with CONFIG.open("rb") as f:
        data = tomllib.load(f)
    if args.quick:
        for table in (data["grid"], *data["cases"]):
            if "steps" in table:
                table["steps"] = [t for t in table["steps"] if t in QUICK_STEPS]
    rows = run_sweep(parse_config(data), out, resume=True, progress=not args.quiet)

    panels = []
    for case in data["cases"]:
        q, sigma = case["sampling_prob"], case["noise_multiplier"]
        panel = [r for r in rows if (r["sampling_prob"], r["noise_multiplier"]) == (q, sigma)]
        panels.append((rf"$q = {q:g}$, $\sigma = {sigma:g}$", panel))
    paths = plot_eps_vs_steps_panels(panels, out / "figure1")
    print("\n".join(map(str, paths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
