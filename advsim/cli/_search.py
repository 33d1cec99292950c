"""`advsim search CONFIG`: a counterexample searched against its exact epsilon."""

from __future__ import annotations

from pathlib import Path

from advsim.cli._common import (
    UsageError,
    _add_run_options,
    _cleanup_if_empty,
    _command,
    _prepare_out,
)

__all__ = ["add_search_command"]

_EXAMPLE_CONFIG = """\
[search]                      # a cell of Cebere et al.'s Fig. 4 heatmap
steps = 25
noise_multiplier = 2.0
batching = "fixed"
counts = [4]                  # B identical examples
canary_schedule = "only:1"
canary_sampled = false
step_sizes = "landscape"      # 1 at step 1, then 1/B
per_step = ["groups"]         # the data field may change with the step
search = ["groups", "regularizer"]
starts = ["landscape", "linear"]
iterations = 100
# confirm_runs = 100000000     # then a confirmation by simulation, 10^8 runs per world,
# confirm_streaming = true     # counted by a streaming audit (resumable: --resume)
"""


def _print_result(result, config, out: Path, *, progress: bool) -> None:
    """The summary of a finished search, and its confirmation by simulation if asked."""
    from advsim.search import confirm

    s = result.summary()
    print(f"best construction: {out / 'best.json'} (from {s['best_from']})")
    print(f"  exact epsilon      {s['exact_epsilon']:.4f} +- {s['exact_error']:.1e} "
          f"(refinement estimate, delta = {config.delta:g})")  # fmt: skip
    print(f"  best paper start   {s['best_paper_exact_epsilon']:.4f}")
    print(f"  random search      {s['random_exact_epsilon']:.4f} (same budget)")
    print(f"  heuristic          {s['heuristic_epsilon']:.4f}")
    print(f"  composition        {s['composition_epsilon']:.4f}")
    if not result.improved:
        print("  the search found nothing better than its best start (beyond the engine's error)")
    if config.confirm_runs:
        c = confirm(result.best, config.delta, config.confirm_runs, seed=config.seed,
                    progress=progress, streaming=config.confirm_streaming,
                    pilot_runs=config.confirm_pilot_runs,
                    checkpoint=out / "confirm-stream.json" if config.confirm_streaming
                    else None)  # fmt: skip
        verdict = "yes" if c.sound else "NO"
        how = "a streaming audit" if config.confirm_streaming else "an in-memory audit"
        print(f"confirmation by simulation ({c.runs:,} runs per world, {how}): eps_lower "
              f"{c.eps_lower:.4f} ({c.guarantee}), {c.ratio:.3f} of the exact epsilon")  # fmt: skip
        print(f"  at most the exact epsilon {c.exact_epsilon:.4f} + its error: {verdict}")
        print(f"  the exact law's decisive event: probability {c.decisive_in:.2e} with the "
              f"canary, {c.decisive_out:.2e} without (an audit of N runs per world sees "
              "about N times each)")  # fmt: skip
        if c.certified is not None:
            print(f"  certify_violation of the heuristic at these runs: {c.certified}")
    print(f"wrote {out / 'search.json'}, {out / 'trace.csv'}, {out / 'fields.png'}")


def _cmd_search(args) -> int:
    from advsim.search import load_config, search  # here: the parser imports no jax

    config = load_config(args.config)
    out = (
        Path(args.out)
        if args.out is not None
        else Path("advsim-results") / (f"search-{Path(args.config).stem}")
    )
    if args.out is not None and not str(args.out).strip():
        raise UsageError("--out '' names no folder; give a folder path")
    _prepare_out(args, out, "search", "state.json")
    with _cleanup_if_empty(out):
        result = search(config, out, resume=args.resume, progress=not args.quiet)
    _print_result(result, config, out, progress=not args.quiet)
    return 0


def add_search_command(sub) -> None:
    """Adds `advsim search` to the subcommands `sub`."""
    epilog = f"a config (TOML):\n{_EXAMPLE_CONFIG}\nexample:\n  advsim search cell.toml --out DIR\n"
    summary = "search a 1-D construction maximising the exact last-iterate epsilon"
    description = (
        "Maximises the exact last-iterate epsilon at one cell (T, q, sigma, delta, batch) "
        "over piecewise-linear constructions (advsim.mechanisms.PiecewiseConstruction): "
        "projected Adam through the exact engine's fixed-grid value from the papers' "
        "constructions and random members, beside random search at the same budget, "
        "checkpointed in --out. Every reported epsilon is recomputed by "
        "advsim.exact.last_iterate_epsilon; the best is confirmed by an audit where the "
        "config asks (advsim.search.search)."
    )
    p = _command(sub, _cmd_search, "search", help=summary, description=description,
                 epilog=epilog)  # fmt: skip
    p.add_argument("config", help="a TOML file with a [search] table (advsim.search.SearchConfig)")
    _add_run_options(
        p,
        out_help="output folder (default advsim-results/search-<config name>)",
        resume_help="continue the search already in --out",
    )
