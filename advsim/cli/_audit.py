"""`advsim audit`: the built-in experiment, its mechanisms, its table and its time report."""

from __future__ import annotations

import datetime
import sys
import time
from pathlib import Path

from tqdm.auto import tqdm

from advsim import bounds
from advsim._io import provenance, write_csv, write_json
from advsim._validation import (
    check_delta,
    check_in_interval,
    check_int,
    check_positive,
    check_probability,
)
from advsim.cli._common import UsageError, _check, _check_out, _cleanup_if_empty, _one_line
from advsim.experiment import run_audit
from advsim.mechanisms import LinearProcess
from advsim.plotting import plot_eps_vs_steps
from advsim.sweep import MECHANISM_ALIASES, resolve

__all__ = ["run_audit"]


#: Flags that only the mechanisms built from a dataset take, and their constructor names.
_DATA_FLAGS = {
    "dim": "dim",
    "num_examples": "num_examples",
    "data_distribution": "distribution",
    "data_scale": "scale",
}


def _audit_mechanisms() -> dict:
    """The sweep aliases of the linear processes (the heuristic's tight case, the one the
    audit's defaults and the table's columns are made for), resolved."""
    out = {}
    for name in MECHANISM_ALIASES:
        plugin = resolve("mechanism", name)
        owner = getattr(plugin.factory, "__self__", plugin.factory)
        if owner is LinearProcess:
            out[name] = plugin
    return out


_MECHANISMS = _audit_mechanisms()


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _mechanism_kwargs(args) -> dict:
    """The data flags as constructor arguments; refuses those the mechanism does not take."""
    plugin = _MECHANISMS[args.mechanism]
    kwargs = {}
    for dest, param in _DATA_FLAGS.items():
        value = getattr(args, dest)
        if value is None:
            continue
        if "num_examples" not in plugin.params:
            takers = [n for n, p in _MECHANISMS.items() if "num_examples" in p.params]
            raise UsageError(
                f"{_flag(dest)} does not apply to --mechanism {args.mechanism} (it has no "
                f"dataset); drop it, or use --mechanism {' or '.join(takers)}"
            )
        kwargs[param] = value
    if "num_examples" in plugin.params:
        kwargs["data_seed"] = args.seed
    return kwargs


def _build_mechanism(args, steps: int, sigma: float):
    return _MECHANISMS[args.mechanism].build(
        steps=steps,
        sampling_prob=args.sampling_prob,
        noise_multiplier=sigma,
        clip_norm=args.clip_norm,
        **_mechanism_kwargs(args),
    )


def _build_adversary(name: str):
    """An adversary that takes no arguments, by sweep alias or class path."""
    try:
        return resolve("adversary", name, "--adversary").build()
    except TypeError as err:
        raise UsageError(f"--adversary {name!r} needs arguments ({err}); use a sweep") from None
    except ValueError as err:
        raise UsageError(str(err)) from None


def _eps(value, mark: str = "") -> str:
    return "n/a" if value is None else f"{value:.3f}{mark}"


_HEAD = (
    f"{'T':>6} {'sigma':>8} {'eps_lower':>10} {'eps_point':>10} {'heuristic':>10} "
    f"{'composition':>12}  guarantee of eps_lower"
)


def _format_row(r) -> str:
    above = bool(r.get("eps_point_above_composition"))
    guarantee = r.get("guarantee", "")
    if r.get("assumption_rejected"):
        guarantee += ", assumption REJECTED"
    return (
        f"{r['steps']:>6d} {r['noise_multiplier']:>8.4f} {_eps(r['eps_lower']):>10} "
        f"{_eps(r['eps_point'], '!' if above else ''):>10} {r['heuristic']:>10.3f} "
        f"{r['composition']:>12.3f}  {guarantee}"
    )


def _format_notes(rows) -> list[str]:
    """What the table's markers mean (only those that occur).

    `!` after eps_point: the estimate lies above the composition bound, outside the
    possible range for DP-SGD (too few runs for the rates it needs); `n/a`: no number (the
    reason is in results.json); `REJECTED` in the guarantee column: the audit's assumption
    failed its held-out check, so its eps_lower is not credible.
    """
    lines = []
    if any(r.get("eps_point_above_composition") for r in rows):
        lines.append(
            "! eps_point lies above the composition bound: an estimate outside the possible "
            "range (too few runs for the rates it reads)"
        )
    if any(r.get("eps_lower") is None or r.get("eps_point") is None for r in rows):
        lines.append("n/a: no number; results.json says why (eps_lower_note, eps_point_note)")
    if any(r.get("assumption_rejected") for r in rows):
        lines.append(
            "REJECTED: the audit's assumption failed its check on the held-out runs; "
            "use --method eps_delta or tradeoff for an assumption-free bound"
        )
    if any(r.get("guarantee") != "rigorous" for r in rows):
        lines.append(
            "eps_lower is an (eps, delta) lower bound at the stated confidence under the "
            "assumption named in the guarantee column ('rigorous' = none, held-out threshold)"
        )
    return lines


def _format_table(rows) -> str:
    """The whole audit table (header, rows, notes), as `advsim audit` prints it."""
    return "\n".join([_HEAD, "-" * len(_HEAD), *map(_format_row, rows), *_format_notes(rows)])


def _check_audit_args(args) -> float | None:
    """Every check that needs no computation; returns the target epsilon (None: sigma
    given)."""
    if args.noise_multiplier is not None and args.target_epsilon is not None:
        raise UsageError(
            "give either --noise-multiplier or --target-epsilon, not both (sigma is given, "
            "or calibrated to the target)"
        )
    _check("--sampling-prob", check_probability, args.sampling_prob)
    _check("--delta", check_delta, args.delta)
    _check("--confidence", check_in_interval, args.confidence, 0.5, 1.0)
    _check("--clip-norm", check_positive, args.clip_norm)
    _check("--trials", check_int, args.trials, minimum=2)
    if args.noise_multiplier is not None:
        _check("--noise-multiplier", check_positive, args.noise_multiplier)
        return None
    target = 8.0 if args.target_epsilon is None else args.target_epsilon
    _check("--target-epsilon", check_positive, target)
    return target


def _calibrate(target: float, args, steps: int) -> float:
    try:
        return bounds.calibrate_noise_multiplier(
            target, args.delta, steps, args.sampling_prob, progress=False if args.quiet else None
        )
    except (ValueError, RuntimeError, ArithmeticError) as err:
        raise UsageError(
            f"cannot calibrate sigma for T={steps} to --target-epsilon {target:g} at --delta "
            f"{args.delta:g} (q={args.sampling_prob:g}): {_one_line(err)}; try another "
            "--delta or --target-epsilon, or give --noise-multiplier"
        ) from None


def _cmd_audit(args) -> int:
    target = _check_audit_args(args)
    if args.data_scale is not None:
        _check("--data-scale", check_positive, args.data_scale)
    adversary = _build_adversary(args.adversary)
    for steps in args.steps:  # every T's mechanism, built before anything runs
        try:
            _build_mechanism(args, steps, 1.0 if target is not None else args.noise_multiplier)
        except (TypeError, ValueError) as err:
            raise UsageError(f"--mechanism {args.mechanism} at T={steps}: {err}") from None
    out = (
        Path(args.out)
        if args.out
        else Path("advsim-results") / ("audit-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    )
    _check_out("--out", out)
    config = {k: v for k, v in vars(args).items() if k != "func"}
    config["target_epsilon"] = target
    sigma_text = (
        f"sigma={args.noise_multiplier:g}"
        if target is None
        else (f"sigma calibrated to composition eps={target:g}")
    )
    print(
        f"advsim audit: {args.mechanism}, q={args.sampling_prob:g}, {sigma_text} at "
        f"delta={args.delta:g}, {args.trials:,} runs per world, {args.method} audit; "
        f"results go to {out}",
        flush=True,
    )

    rows, calibration = [], []
    bar = tqdm(args.steps, desc="audit", unit="T", disable=args.quiet, leave=False)
    start = time.perf_counter()
    with _cleanup_if_empty(out):
        for i, steps in enumerate(bar):
            sigma = args.noise_multiplier
            if sigma is None:
                bar.set_postfix_str(f"T={steps}, calibrating sigma", refresh=True)
                tic = time.perf_counter()
                sigma = _calibrate(target, args, steps)
                calibration.append(time.perf_counter() - tic)
            bar.set_postfix(T=steps, sigma=f"{sigma:.3f}")
            try:
                record = run_audit(
                    _build_mechanism(args, steps, sigma),
                    adversary,
                    trials=args.trials,
                    seed=args.seed,
                    method=args.method,
                    delta=args.delta,
                    confidence=args.confidence,
                    threshold_selection=args.threshold,
                    chunk_size=args.chunk_size,
                    progress=not args.quiet,
                )
            except (TypeError, ValueError) as err:
                raise UsageError(
                    f"T={steps}, sigma={sigma:g}: {_one_line(err)}"
                    + (f"; the {len(rows)} finished rows are in {out}" if rows else "")
                ) from None
            rows.append(record.to_dict())
            # Results so far are always complete files: a killed run keeps what it finished.
            out.mkdir(parents=True, exist_ok=True)
            write_csv(out / "results.csv", rows)
            write_json(out / "results.json", {"provenance": provenance(config), "rows": rows})
            lines = ([_HEAD, "-" * len(_HEAD)] if i == 0 else []) + [_format_row(rows[-1])]
            for line in lines:
                tqdm.write(line, file=sys.stdout)
            sys.stdout.flush()
    for line in _format_notes(rows):
        print(line)
    title = (
        f"{args.mechanism}, q={args.sampling_prob:g}, {args.method} audit, "
        f"{args.trials:g} runs/world"
    )
    tic = time.perf_counter()
    paths = plot_eps_vs_steps(rows, out / "eps_vs_steps", title=title)
    plotting = time.perf_counter() - tic
    print(_time_report(rows, sum(calibration), plotting, time.perf_counter() - start))
    print(f"wrote {out / 'results.csv'}, {out / 'results.json'}, " + ", ".join(map(str, paths)))
    return 0


def _time_report(rows, calibration: float, plotting: float, total: float) -> str:
    """Where the time went, measured: calibration here, the rest by `run_audit`."""
    parts = [
        ("calibration", calibration),
        ("compilation", sum(r["compile_time_s"] for r in rows)),
        ("simulation", sum(r["simulate_time_s"] for r in rows)),
        ("audit", sum(r["audit_time_s"] for r in rows)),
        ("bounds", sum(r["bounds_time_s"] for r in rows)),
        ("plot", plotting),
    ]
    other = max(total - sum(t for _, t in parts), 0.0)
    text = ", ".join(f"{name} {t:.1f} s" for name, t in parts if name != "calibration" or t)
    return f"time: {total:.1f} s in all: {text}, other {other:.1f} s"
