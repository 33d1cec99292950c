r"""One training run with m canaries, repeated: the driver behind one-run auditing.

A one-run audit (Steinke, Nasr & Jagielski 2023, arXiv:2305.08846;
`advsim.audits.one_run_audit`) needs, from *one* run, every canary's inclusion bit and
score. `simulate_one_run` repeats that one run many times, independently, so that the
estimator's distribution and coverage can be measured against the mechanism's exact
epsilon. Repetition `i` uses the key `fold_in(key, i)` alone:

1. the inclusion bits $S_i \sim \mathrm{Bernoulli}(1/2)^m$ from its first split;
2. one run of the engine (as `advsim.simulate` runs it: it clips every example's
   gradient, samples the batch and adds the noise) on `mechanism.with_included(S_i)`,
   from its second split; the engine's own single canary is absent (`canary_in=False`):
   the m canaries are the mechanism's data groups, each of count 0 or 1;
3. the m scores `mechanism.canary_scores(last model)`.

So the scores do not depend on how many repetitions are computed together.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from advsim._dpsgd import run_mechanism
from advsim._mechanism import AbstractMultiCanary
from advsim._simulate import as_key
from advsim._validation import check_int
from advsim.audits import one_run_audit

__all__ = ["OneRunScores", "simulate_one_run"]

#: Bound on the float32 entries the vectorised repetitions of one batch may hold at once
#: (the engine's per-step gradient table is (m, d) per run).
_BATCH_ENTRIES = 2**24


@dataclasses.dataclass(frozen=True)
class OneRunScores:
    """Scores and inclusion bits of independent repetitions of one run.

    Attributes:
        scores: float64, shape (repetitions, m).
        included: bool, shape (repetitions, m).
    """

    scores: np.ndarray
    included: np.ndarray

    def __post_init__(self):
        if self.scores.shape != self.included.shape or self.scores.ndim != 2:
            raise ValueError(
                "scores and included must both have shape (repetitions, m), got "
                f"{self.scores.shape} and {self.included.shape}"
            )

    @property
    def repetitions(self) -> int:
        return int(self.scores.shape[0])

    @property
    def num_canaries(self) -> int:
        return int(self.scores.shape[1])

    def audit(self, **kwargs) -> list:
        """`advsim.audits.one_run_audit` on every repetition (kwargs passed through).

        The bits were drawn here as fair coins (`jax.random.bernoulli` at 1/2, before and
        independently of the run), so the audit's balance test of the bits is skipped
        (`coin_level=None`) unless `coin_level` is passed: at its default level it would
        refuse about 1 repetition in 1000 of these honest bits.
        """
        kwargs.setdefault("coin_level", None)
        return [
            one_run_audit(s, b, **kwargs) for s, b in zip(self.scores, self.included, strict=True)
        ]


def _one_repetition(mechanism: AbstractMultiCanary, key):
    k_bits, k_run = jax.random.split(key)
    included = jax.random.bernoulli(k_bits, 0.5, (mechanism.num_canaries,))
    final = run_mechanism(mechanism.with_included(included), False, key=k_run)
    return mechanism.canary_scores(final), included


@eqx.filter_jit
def _batch(mechanism, keys, width: int):
    return jax.lax.map(lambda k: _one_repetition(mechanism, k), keys, batch_size=width)


def simulate_one_run(
    mechanism: AbstractMultiCanary, repetitions: int, *, key, batch: int = 64
) -> OneRunScores:
    """Runs `repetitions` independent copies of the one run; returns bits and scores.

    Args:
        mechanism: an `AbstractMultiCanary` (e.g. `advsim.mechanisms.OneRunGradientCanaries`).
        repetitions: >= 1.
        key: a jax key or an integer seed (`advsim.as_key`).
        batch: repetitions per compiled call (the last call is padded and trimmed).

    Returns:
        `OneRunScores` with arrays of shape (repetitions, m).

    Raises:
        TypeError: a mechanism without the `AbstractMultiCanary` capability.
        ValueError: repetitions or batch < 1.

    Example:
        >>> from advsim.mechanisms import OneRunGradientCanaries
        >>> mech = OneRunGradientCanaries(steps=2, noise_multiplier=1.0, num_canaries=8)
        >>> simulate_one_run(mech, 3, key=0).scores.shape
        (3, 8)
    """
    if not isinstance(mechanism, AbstractMultiCanary):
        raise TypeError(
            "simulate_one_run needs an AbstractMultiCanary (m canaries with their own "
            f"inclusion bits), got {type(mechanism).__name__}"
        )
    repetitions = check_int("repetitions", repetitions, minimum=1)
    batch = min(check_int("batch", batch, minimum=1), repetitions)
    key = as_key(key)
    d = int(np.prod(jax.eval_shape(mechanism.init_model).shape))
    width = max(1, min(batch, _BATCH_ENTRIES // max(1, mechanism.num_canaries * d)))
    scores, included = [], []
    for start in range(0, repetitions, batch):
        idx = np.arange(start, start + batch, dtype=np.uint32)  # padded to a full batch
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.asarray(idx))
        s, b = _batch(mechanism, keys, width)
        scores.append(np.asarray(s, np.float64))
        included.append(np.asarray(b, bool))
    scores = np.concatenate(scores)[:repetitions]
    included = np.concatenate(included)[:repetitions]
    if not np.all(np.isfinite(scores)):
        raise ValueError("a repetition gave non-finite scores")
    return OneRunScores(scores=scores, included=included)
