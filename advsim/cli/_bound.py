"""`advsim bound`: the heuristic, composition and full-batch epsilons of one setting."""

from __future__ import annotations

import math

from advsim.cli._common import (
    UsageError,
    _check,
    _command,
    _one_line,
    _para,
    _positive_int,
)

__all__ = ["add_bound_command"]

#: max_{t <= T} takes under a second at T = 10^5 (branch and bound over t), longer beyond.
_MAX_OVER_STEPS_LIMIT = 100_000


def _cmd_bound(args) -> int:
    from advsim import bounds  # here: the parser imports no jax
    from advsim._validation import check_delta, check_positive, check_probability

    _check("--sampling-prob", check_probability, args.sampling_prob)
    _check("--noise-multiplier", check_positive, args.noise_multiplier)
    _check("--delta", check_delta, args.delta)
    n = args.canary_steps
    if n is not None and n > args.steps:
        raise UsageError(f"--canary-steps must be in [1, --steps = {args.steps}], got {n}")
    kw = {"canary_steps": n} if n is not None else {}
    pos = (args.delta, args.steps, args.sampling_prob, args.noise_multiplier)
    rows = [
        ("heuristic (last iterate)", lambda: bounds.heuristic_epsilon(*pos, **kw)),
        ("heuristic, max over t <= T", lambda: bounds.heuristic_epsilon_max_over_steps(*pos))
        if n is None and args.steps <= _MAX_OVER_STEPS_LIMIT
        else None,
        ("composition (all iterates)", lambda: bounds.composition_epsilon(*pos, **kw)),
        ("full batch (DP-GD)", lambda: bounds.full_batch_epsilon(*pos, **kw)),
    ]
    print(
        f"T={args.steps} q={args.sampling_prob:g} sigma={args.noise_multiplier:g} "
        f"delta={args.delta:g}" + (f" canary_steps={n}" if n is not None else ""),
        flush=True,
    )
    if n is None and args.steps > _MAX_OVER_STEPS_LIMIT:
        print(
            f"  (max over t <= T skipped for T > {_MAX_OVER_STEPS_LIMIT}: it takes longer; "
            "use advsim.bounds.heuristic_epsilon_max_over_steps)"
        )
    failed = []
    for row in rows:
        if row is None:
            continue
        name, compute = row
        try:
            eps = compute()
        except (ValueError, RuntimeError, ArithmeticError, MemoryError) as err:
            # A bound out of its method's reach at these parameters: say why, go on.
            failed.append(name)
            print(f"  {name:<28} not available: {_one_line(err)}", flush=True)
            continue
        value = f"{eps:.6g}" if math.isfinite(eps) else str(eps)
        print(f"  {name:<28} eps = {value}", flush=True)
    if len(failed) == sum(r is not None for r in rows):
        raise UsageError(
            "no bound can be computed at these parameters (see above); check --delta and "
            "--noise-multiplier"
        )
    return 0


def add_bound_command(sub) -> None:
    """Adds `advsim bound` to the subcommands `sub`."""
    b = _command(
        sub,
        _cmd_bound,
        "bound",
        help="print the heuristic, composition and full-batch epsilons",
        description=_para(
            "The reference epsilons of DP-SGD with T steps, Poisson sampling q and "
            "noise multiplier sigma: the last-iterate heuristic (Theorem 1 of arXiv:2410.06186) "
            "and its max over t <= T, composition (dp-accounting's PLD), full batch (DP-GD)."
        ),
        epilog="example:\n  advsim bound --steps 1000 --sampling-prob 0.01 "
        "--noise-multiplier 1 --delta 1e-6\n",
    )
    b.add_argument(
        "--steps", type=_positive_int, required=True, metavar="T", help="number of steps (required)"
    )
    b.add_argument(
        "--sampling-prob",
        type=float,
        required=True,
        metavar="q",
        help="Poisson sampling probability q in (0, 1] (required)",
    )
    b.add_argument(
        "--noise-multiplier", type=float, required=True, metavar="SIGMA", help="sigma (required)"
    )
    b.add_argument("--delta", type=float, default=1e-5, help="delta of every epsilon")
    b.add_argument(
        "--canary-steps",
        type=_positive_int,
        default=None,
        metavar="N",
        help="steps that can carry the canary (default: all T)",
    )
