r"""One-run auditing (Steinke, Nasr & Jagielski 2023, arXiv:2305.08846).

$m$ canaries are each included in the one training run independently with probability
1/2 (the bits $S \in \{0, 1\}^m$). After training, an adversary scores every canary from
the released model, guesses "in" for the $k_+$ highest scores and "out" for the $k_-$
lowest, and abstains on the rest. If the run is $(\epsilon, \delta)$-DP with respect to
each canary, the number $V$ of correct guesses among the $r = k_+ + k_-$ made is
stochastically dominated by $\mathrm{Binomial}(r, e^\epsilon / (1 + e^\epsilon))$ up to a
$\delta$ term (Theorem 5.2 there); Algorithm 3 of their Appendix D turns this into the
p-value

$$p(\epsilon) = \beta + 2 m \delta \max_{1 \le i \le v} \frac{P[v - i \le B < v]}{i},
  \qquad \beta = P[B \ge v], \quad B \sim \mathrm{Binomial}(r, \tfrac{e^\epsilon}{1 +
  e^\epsilon}),$$

(capped at 1), and `eps_lower` is the largest $\epsilon$ with $p(\epsilon) < 1 - c$
(bisection there; Brent's method to 1e-10 here, as jax_privacy's `_epsilon_one_run`
does to its `xtol=1e-6`). With probability at least $c$ the run is then not
$(\epsilon, \delta)$-DP for any $\epsilon <$ `eps_lower`.

**Choosing $k_+$ and $k_-$.** The bound is valid for $k_\pm$ fixed before the scores are
seen. `k_selection` says how they were chosen, and the result's `guarantee` records it:

- `"fixed"`: the caller's `k_plus`, `k_minus` (valid if they were fixed in advance, which
  this function cannot check; the guarantee says so).
- `"bonferroni"` (default): the best of a grid of $K$ pairs (`candidates`, default $k$ in
  1, 2, 5, 10, 20, 50, ... up to $m / 2$ as $(k, 0)$, $(0, k)$, $(k, k)$), each at level
  $(1 - c) / K$: a union bound, so valid on the same run.
- `"split"`: the best pair is chosen on a random half of the canaries (their bits are then
  known, fixed data to the audit), scaled to the other half, and audited there with
  $m$ its size: held out.
- `"same"`: the best pair on the same canaries at level $1 - c$ (reporting the best of
  several k on the scored run): optimistic; the guarantee says so.

**The coins.** The bound rests on the inclusion bits being fair coins, each drawn with
probability 1/2 independently of everything else (the data, the other bits, the training
run's randomness), before training. This function cannot see how they were drawn, but it
refuses bits that are visibly not fair coins: an exact two-sided binomial test of "the
number of ones is Binomial(m, 1/2)" (`scipy.stats.binomtest`) at level `coin_level`
(default `COIN_TEST_LEVEL` = 1e-3) raises a `ValueError`. The level trades a refused
audit of honest bits (at most 1 in 1000: the exact test's size never exceeds its level;
0.00089 at m = 1000) against what the test catches: bits that are all equal (from m = 11
up), 90% ones (from m = 15 up), and at m = 1000 any count of ones at most 447 or at
least 553. Refusing never makes the bound optimistic: with probability at least $c$
the audit reports nothing above the truth, refused or not. The test is a check for gross
mistakes, not a certificate of fairness:

- coins biased by less than about $1.6 / \sqrt{m}$ pass it often, and such a bias alone
  can lift `eps_lower` on pure noise by up to about $6.6 / \sqrt{m}$ (the log-odds of the
  bias);
- a balance test cannot detect bits that depend on the scores (bits set where the score
  is high are balanced and make pure noise look like a leak): that the bits were
  drawn before and independently of training is the caller's to ensure.

Draw them as `np.random.default_rng(seed).random(m) < 0.5` with a seed chosen before
training. `coin_level=None` skips the test, for bits from such a generator whose many
repetitions would otherwise be refused now and then (as `advsim.one_run.simulate_one_run`'s
repetitions are audited by `OneRunScores.audit`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

from advsim.validation import check_delta, check_in_interval, check_int

from ._guarantee import Guarantee
from ._result import _plain

__all__ = [
    "COIN_TEST_LEVEL",
    "K_SELECTIONS",
    "OneRunResult",
    "default_k_candidates",
    "one_run_audit",
    "one_run_epsilon",
    "one_run_guesses",
    "one_run_p_value",
]

K_SELECTIONS = ("bonferroni", "split", "same", "fixed")
"""How `one_run_audit` chooses k+ and k-."""
COIN_TEST_LEVEL = 1e-3
"""The default level of the inclusion bits' balance test (module docstring)."""
_EPS_MAX = 64.0  # e^64 ~ 6e27: no number of guesses resolves a precision that close to 1


def one_run_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """The p-value of Algorithm 3 (Appendix D of arXiv:2305.08846) at `eps`.

    Args:
        m: the number of randomised canaries (in the `2 m delta` term).
        r: guesses made (`k_plus + k_minus`), 0 <= r <= m.
        v: correct guesses, 0 <= v <= r.
        eps: the (eps, delta)-DP claim tested, >= 0.
        delta: its delta, in [0, 1].

    Returns:
        An upper bound on P[V >= v] for any (eps, delta)-DP run, capped at 1.

    Example:
        >>> round(one_run_p_value(1000, 100, 90, 1.0, 0.0), 6)  # P[Bin(100, 0.731) >= 90]
        2.7e-05
    """
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got m={m}, r={r}, v={v}")
    q = scipy.special.expit(eps)
    beta = float(scipy.stats.binom.sf(v - 1, r, q))  # P[B >= v]
    if delta == 0 or v == 0:
        return min(beta, 1.0)
    i = np.arange(1, v + 1)
    # P[v - i <= B < v] = P[B >= v - i] - P[B >= v], the running sums of Algorithm 3.
    window = scipy.stats.binom.sf(v - i - 1, r, q) - beta
    alpha = float(np.max(window / i))
    return min(beta + alpha * delta * 2 * m, 1.0)


def one_run_epsilon(m: int, r: int, v: int, *, delta: float, level: float) -> float:
    """The largest eps with `one_run_p_value(m, r, v, eps, delta) < level` (0 if none).

    The p-value increases with eps, so this is a root of `p(eps) = level`, found by
    Brent's method to 1e-10 (the paper bisects; jax_privacy uses Brent with xtol 1e-6).

    Args:
        m, r, v: canaries, guesses, correct guesses.
        delta: in [0, 1).
        level: the failure probability `1 - confidence` (or a Bonferroni share), in (0, 1).

    Returns:
        eps_lower >= 0 (at most 64).
    """
    level = check_in_interval("level", level, 0.0, 1.0)
    if r == 0 or one_run_p_value(m, r, v, 0.0, 0.0) >= level:
        return 0.0  # even delta = 0 cannot reject at eps = 0

    def objective(eps):
        return level - one_run_p_value(m, r, v, eps, delta)

    if objective(0.0) <= 0:
        return 0.0
    lo, hi = 0.0, 1.0
    while objective(hi) > 0:
        if hi >= _EPS_MAX:
            return _EPS_MAX
        lo, hi = hi, min(2 * hi, _EPS_MAX)
    return float(scipy.optimize.brentq(objective, lo, hi, xtol=1e-10, rtol=1e-14))


def one_run_guesses(scores, included, k_plus: int, k_minus: int) -> tuple[int, int]:
    """`(r, v)`: guesses and correct guesses for "in" on the `k_plus` highest scores and
    "out" on the `k_minus` lowest (ties broken by canary index, fixed before the run)."""
    order = np.argsort(scores, kind="stable")
    top = order[order.size - k_plus :] if k_plus else order[:0]
    bottom = order[:k_minus]
    v = int(np.count_nonzero(included[top])) + int(np.count_nonzero(~included[bottom]))
    return k_plus + k_minus, v


def default_k_candidates(m: int) -> list[tuple[int, int]]:
    """The default grid of `(k_plus, k_minus)`: k in 1, 2, 5, 10, 20, 50, ... <= m / 2, as
    (k, 0), (0, k) and (k, k)."""
    ks = sorted({c * 10**e for e in range(0, 12) for c in (1, 2, 5) if c * 10**e <= max(m // 2, 1)})
    return [(k, 0) for k in ks] + [(0, k) for k in ks] + [(k, k) for k in ks]


@dataclasses.dataclass(frozen=True)
class OneRunResult:
    """The outcome of a one-run audit.

    Attributes:
        method: `"one_run"`.
        eps_lower: with probability >= `confidence`, the run is not (eps, delta)-DP with
            respect to each canary for any eps < `eps_lower` (what `guarantee` states).
        delta, confidence: as requested.
        guarantee: the statement, and how k+ and k- were chosen (`held_out`,
            `multiplicity`).
        num_canaries: m, the canaries the p-value counts (half of them under `"split"`).
        k_plus, k_minus: the guesses "in" on the highest scores and "out" on the lowest.
        num_guesses, num_correct: r = k_plus + k_minus and the correct ones, v.
        extras: the selection, the level used, the candidates' count.
    """

    method: str
    eps_lower: float
    delta: float
    confidence: float
    guarantee: Guarantee
    num_canaries: int
    k_plus: int
    k_minus: int
    num_guesses: int
    num_correct: int
    extras: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        eps = float(self.eps_lower)
        if math.isnan(eps) or eps < 0:
            raise ValueError(f"eps_lower must be a number >= 0, got {eps!r}")
        object.__setattr__(self, "eps_lower", eps)

    @property
    def rigorous(self) -> bool:
        """True iff `eps_lower` assumes nothing and k+/k- were not chosen on the audited
        canaries without accounting for it."""
        return self.guarantee.rigorous

    @classmethod
    def make(
        cls,
        method: str,
        eps_lower: float,
        delta: float,
        confidence: float,
        *,
        assumption: str,
        held_out: bool,
        multiplicity: str,
        num_canaries: int,
        pair: tuple[int, int],
        guesses: tuple[int, int],
        extras: dict,
        certified: str | None = None,
    ) -> OneRunResult:
        """The result of guesses `(r, v)` made with `pair = (k_plus, k_minus)` on
        `num_canaries` canaries, with its `Guarantee` (an (eps, delta) lower bound under
        `assumption`)."""
        return cls(
            method=method,
            eps_lower=eps_lower,
            delta=delta,
            confidence=confidence,
            guarantee=Guarantee(
                statement="eps_delta_lower_bound",
                assumption=assumption,
                held_out=held_out,
                multiplicity=multiplicity,
                certified=certified,
            ),
            num_canaries=num_canaries,
            k_plus=pair[0],
            k_minus=pair[1],
            num_guesses=guesses[0],
            num_correct=guesses[1],
            extras=extras,
        )

    def to_dict(self) -> dict:
        """All fields as plain Python values, JSON-ready."""
        return guaranteed_dict(self)


def guaranteed_dict(result) -> dict:
    """A result dataclass's fields as plain values, its `guarantee` as `Guarantee.to_dict`
    and `rigorous` added: the JSON form every result with a guarantee shares."""
    out = {
        f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name != "guarantee"
    }
    out["guarantee"] = result.guarantee.to_dict()
    out["rigorous"] = result.rigorous
    return _plain(out)


def _check_inputs(scores, included):
    scores = np.asarray(scores, np.float64)
    included = np.asarray(included)
    if scores.ndim != 1 or scores.size < 2:
        raise ValueError(
            f"scores must be a 1-D array of m >= 2 per-canary scores, got shape {scores.shape}"
        )
    if included.shape != scores.shape:
        raise ValueError(
            f"included must have the shape of scores {scores.shape}, got {included.shape}"
        )
    if included.dtype != bool:
        if not np.all((included == 0) | (included == 1)):
            raise ValueError("included must hold 0/1 or booleans (the inclusion bits)")
        included = included.astype(bool)
    if not np.all(np.isfinite(scores)):
        raise ValueError(f"scores must be finite; {int(np.sum(~np.isfinite(scores)))} are not")
    return scores, included


def check_coins(included, level: float | None = COIN_TEST_LEVEL) -> float:
    """Refuses inclusion bits that an exact two-sided binomial test rejects as fair coins.

    Args:
        included: the boolean inclusion bits, shape (m,).
        level: the test's level in (0, 1), or None to skip it (module docstring).

    Returns:
        The test's p-value (1.0 when skipped).

    Raises:
        ValueError: the number of ones is too far from m / 2 for fair coins at `level`;
            the message says how to draw the bits.
    """
    if level is None:
        return 1.0
    level = check_in_interval("coin_level", level, 0.0, 1.0)
    m, ones = int(included.size), int(np.count_nonzero(included))
    p = float(scipy.stats.binomtest(ones, m, 0.5).pvalue)
    if p < level:
        raise ValueError(
            f"included: {ones} of {m} inclusion bits are 1 ({ones / m:.1%}); an exact "
            f"binomial test rejects fair coins (p = {p:.2g} < coin_level = {level:g}). The "
            "one-run bound holds only for bits drawn with probability 1/2 each, "
            "independently of everything else (the data, the scores, the training run), "
            "before training: e.g. np.random.default_rng(seed).random(m) < 0.5"
        )
    return p


def _check_pairs(candidates, m: int) -> list[tuple[int, int]]:
    pairs = []
    for pair in candidates:
        kp, km = pair
        kp = check_int("k_plus", kp, minimum=0, maximum=m)
        km = check_int("k_minus", km, minimum=0, maximum=m)
        if kp + km > m or kp + km == 0:
            raise ValueError(
                f"k_plus + k_minus must be in [1, m = {m}], got k_plus={kp}, k_minus={km}"
            )
        pairs.append((kp, km))
    if not pairs:
        raise ValueError("candidates must hold at least one (k_plus, k_minus) pair")
    return pairs


def _best_pair(scores, included, pairs, delta, level) -> tuple:
    """The pair with the largest eps at `level` (pruned like jax_privacy: a pair whose raw
    precision v / r is at most e^eps / (1 + e^eps) of the best so far cannot beat it)."""
    m = scores.size
    best = (0.0, pairs[0], *one_run_guesses(scores, included, *pairs[0]))
    for kp, km in pairs:
        r, v = one_run_guesses(scores, included, kp, km)
        if v / r <= scipy.special.expit(best[0]):
            continue
        eps = one_run_epsilon(m, r, v, delta=delta, level=level)
        if eps > best[0]:
            best = (eps, (kp, km), r, v)
    return best


def one_run_audit(
    scores,
    included,
    *,
    delta: float,
    confidence: float = 0.95,
    k_selection: str = "bonferroni",
    k_plus: int | None = None,
    k_minus: int | None = None,
    candidates=None,
    seed: int = 0,
    coin_level: float | None = COIN_TEST_LEVEL,
) -> OneRunResult:
    """Audits one training run from its m canaries' scores and inclusion bits.

    Args:
        scores: the adversary's score of each canary (higher means "included"), shape (m,).
        included: each canary's inclusion bit (drawn with probability 1/2, independently),
            shape (m,).
        delta: the DP delta, in (0, 1).
        confidence: c in (0.5, 1).
        k_selection: one of `K_SELECTIONS` (see the module docstring).
        k_plus, k_minus: the guesses for `"fixed"` (required there, refused otherwise).
        candidates: `(k_plus, k_minus)` pairs searched by the other selections (default
            `default_k_candidates(m)`; under `"split"` read as fractions of m and scaled).
        seed: seed of the canary split (`"split"`).
        coin_level: the level of the bits' balance test (default 1e-3), or None to skip
            it for bits from a known fair generator (module docstring).

    Returns:
        A `OneRunResult`; `extras["coin_p_value"]` is the balance test's p-value.

    Raises:
        ValueError: bad shapes, non-finite scores, bits not 0/1, bits the balance test
            rejects as fair coins, bad delta/confidence,
            an unknown `k_selection`, k's outside [0, m] or summing to 0 or more than m.

    References:
        Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS
        2023 (arXiv:2305.08846): Theorem 5.2 and Algorithm 3 (Appendix D).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> included = rng.random(1000) < 0.5
        >>> scores = rng.normal(4.0 * included, 1.0)
        >>> r = one_run_audit(scores, included, delta=1e-5)
        >>> r.rigorous and 0 < r.eps_lower
        True
    """
    scores, included = _check_inputs(scores, included)
    coin_p = check_coins(included, coin_level)
    delta = check_delta("delta", delta)
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    if k_selection not in K_SELECTIONS:
        raise ValueError(f"k_selection must be one of {K_SELECTIONS}, got {k_selection!r}")
    fixed = k_selection == "fixed"
    if fixed != (k_plus is not None or k_minus is not None):
        raise ValueError(
            "k_plus and k_minus are given exactly when k_selection='fixed', got "
            f"k_selection={k_selection!r}, k_plus={k_plus!r}, k_minus={k_minus!r}"
        )
    m = scores.size
    level = 1.0 - confidence
    extras = {"k_selection": k_selection, "m_total": m, "coin_p_value": coin_p}
    if fixed:
        (pair,) = _check_pairs([(k_plus or 0, k_minus or 0)], m)
        r, v = one_run_guesses(scores, included, *pair)
        eps = one_run_epsilon(m, r, v, delta=delta, level=level)
        held_out, multiplicity = (
            True,
            f"k+ = {pair[0]}, k- = {pair[1]} given by the caller: valid if fixed before "
            "the scores were seen",
        )
    elif k_selection == "split":
        eps, pair, r, v, m, multiplicity, split_extras = _split_audit(
            scores, included, candidates, seed, delta, level
        )
        held_out, extras = True, {**extras, **split_extras}
    else:
        pairs = _check_pairs(default_k_candidates(m) if candidates is None else candidates, m)
        bonf = k_selection == "bonferroni"
        level_used = level / len(pairs) if bonf else level
        eps, pair, r, v = _best_pair(scores, included, pairs, delta, level_used)
        held_out = bonf
        multiplicity = (
            f"Bonferroni over {len(pairs)} (k+, k-) pairs"
            if bonf
            else f"the best of {len(pairs)} (k+, k-) pairs on the same run, selection not "
            "accounted for"
        )
        extras.update(n_candidates=len(pairs), level=level_used)
    return OneRunResult.make(
        "one_run",
        eps,
        delta,
        confidence,
        assumption="none",
        held_out=held_out,
        multiplicity=multiplicity,
        num_canaries=m,
        pair=pair,
        guesses=(r, v),
        extras=extras,
    )


def _split_audit(scores, included, candidates, seed, delta: float, level: float):
    """`k_selection="split"`: (k+, k-) chosen on a random half of the canaries, the other
    half audited. Returns `(eps, pair, r, v, m audited, multiplicity text, extras)`."""
    m = scores.size
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    perm = rng.permutation(m)
    sel, cnt = perm[: m // 2], perm[m // 2 :]
    pairs = _check_pairs(default_k_candidates(m) if candidates is None else candidates, m)
    sel_pairs = _scaled(pairs, m, sel.size)
    _, chosen, _, _ = _best_pair(scores[sel], included[sel], sel_pairs, delta, level)
    frac = (chosen[0] / sel.size, chosen[1] / sel.size)
    (pair,) = _scaled([frac], 1, cnt.size)
    r, v = one_run_guesses(scores[cnt], included[cnt], *pair)
    eps = one_run_epsilon(cnt.size, r, v, delta=delta, level=level)
    multiplicity = (
        f"k+ and k- chosen among {len(pairs)} pairs on {sel.size} other canaries, "
        f"audited on the remaining {cnt.size}"
    )
    extras = {"seed": seed, "n_candidates": len(pairs), "chosen_on_selection_half": chosen}
    return eps, pair, r, v, cnt.size, multiplicity, extras


def _scaled(pairs, m_from: int, m_to: int) -> list[tuple[int, int]]:
    """Pairs scaled from m_from canaries to m_to (rounded, at least one guess, <= m_to)."""
    out = []
    for kp, km in pairs:
        a = int(round(kp * m_to / m_from))
        b = int(round(km * m_to / m_from))
        if kp and not a:
            a = 1
        if km and not b:
            b = 1
        while a + b > m_to:
            a, b = (a - 1, b) if a >= b else (a, b - 1)
        out.append((a, b))
    return list(dict.fromkeys(out))
