r"""One-run f-DP audit against the Gaussian trade-off curve (Mahloujifar, Melis & Chaudhuri
2024, "Auditing f-Differential Privacy in One Run", arXiv:2410.22235).

The same game as `one_run_audit` (m canaries, each in the one run with probability 1/2;
"in" guessed on the k highest scores, abstentions elsewhere, v correct), but the claim
tested is "the run is f-DP" for a whole trade-off curve f rather than one (eps, delta)
pair, which uses the guesses more efficiently. For a claimed curve f with blow-up function
$B(x) = 1 - f(x)$ (for the Gaussian curve $G_\mu$: $B(x) = \Phi(\Phi^{-1}(x) + \mu)$), the
claim is rejected at level $\tau$ when the recursion of their numerical bound (jax_privacy's
`audit_rh_with_cap`) ends with $r + h > k / m$: starting from $r = \tau v / m$ and
$h = \tau (k - v) / m$, for $i = v - 1, \dots, 0$,

$$h' = \max(h, B^{-1}(r)), \qquad r \leftarrow \min\big(1, r + \tfrac{i}{k - i}(h' - h)\big),
  \qquad h \leftarrow h',$$

stopping early once $h$ no longer moves. `mu_lower` is the largest $\mu$ whose $G_\mu$
claim is rejected (bisection; the rejection is monotone in $\mu$): with probability at
least `confidence` the run is not $\mu$-GDP for any $\mu <$ `mu_lower`, which assumes
nothing. Its `eps_lower` is the (eps, delta) of $G_{\mu_{lower}}$ (Corollary 2.13 of
arXiv:1905.02383): an (eps, delta) bound only if the run's trade-off curve is Gaussian,
so the guarantee's assumption is `"gaussian_tradeoff"` (as for `GaussianDPAudit`), with
the GDP statement in `certified`. jax_privacy's `epsilon_one_run_fdp` computes the same
number (it parameterises $G_\mu$ by the eps of `dp_accounting.get_sigma_gaussian`) and
calls it epsilon without that caveat.

Only k- = 0 (as jax_privacy): the recursion above counts "in" guesses.
"""

from __future__ import annotations

from scipy.special import ndtr, ndtri

from advsim._validation import check_delta, check_in_interval, check_int

from ._guarantee import Guarantee
from ._one_run import OneRunResult, _check_inputs, one_run_guesses

__all__ = ["gdp_one_run_rejects", "one_run_fdp_audit", "one_run_gdp_mu"]

_MU_MAX = 40.0  # G_40 is indistinguishable from perfect separation at any sample size


def gdp_one_run_rejects(m: int, k: int, v: int, mu: float, level: float) -> float:
    """The recursion's margin `r + h - k / m` for the claim G_mu; > 0 rejects it."""
    if k == 0:
        return -1.0
    r = level * v / m
    h = level * (k - v) / m
    for i in range(v - 1, -1, -1):
        h_new = max(h, float(ndtr(ndtri(r) - mu)))  # B^{-1}(r) for G_mu
        if h_new == h:
            break
        r = min(r + (i / (k - i)) * (h_new - h), 1.0)
        h = h_new
    return r + h - k / m


def one_run_gdp_mu(m: int, k: int, v: int, *, level: float, tol: float = 1e-10) -> float:
    """The largest mu whose G_mu claim the (m, k, v) guesses reject at `level` (0 if none)."""
    level = check_in_interval("level", level, 0.0, 1.0)
    if gdp_one_run_rejects(m, k, v, 0.0, level) <= 0:
        return 0.0
    if gdp_one_run_rejects(m, k, v, _MU_MAX, level) > 0:
        return _MU_MAX
    lo, hi = 0.0, _MU_MAX
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if gdp_one_run_rejects(m, k, v, mid, level) > 0:
            lo = mid
        else:
            hi = mid
    return lo


def one_run_fdp_audit(
    scores,
    included,
    *,
    delta: float,
    confidence: float = 0.95,
    k_plus: int | None = None,
    candidates=None,
) -> OneRunResult:
    """One-run audit of the Gaussian trade-off claim (module docstring).

    Args:
        scores, included: per-canary scores and inclusion bits, shape (m,).
        delta: the delta at which `mu_lower` is read as eps, in (0, 1).
        confidence: c in (0.5, 1).
        k_plus: a number of "in" guesses fixed by the caller; else the best of
            `candidates` (default 1, 2, 5, 10, ... <= m / 2) with Bonferroni over them.

    Returns:
        A `OneRunResult` (method `"one_run_fdp"`) with `extras["mu_lower"]`.

    References:
        Mahloujifar, Melis & Chaudhuri, arXiv:2410.22235 (the numerical bound for
        abstaining guessers); Dong, Roth & Su, arXiv:1905.02383, Corollary 2.13.
    """
    from advsim.bounds import gdp_epsilon

    scores, included = _check_inputs(scores, included)
    delta = check_delta("delta", delta)
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    m = scores.size
    if k_plus is not None:
        if candidates is not None:
            raise ValueError("give k_plus or candidates, not both")
        ks = [check_int("k_plus", k_plus, minimum=1, maximum=m)]
        multiplicity = f"k+ = {ks[0]} given by the caller: valid if fixed before the scores"
    else:
        default = sorted(
            {c * 10**e for e in range(12) for c in (1, 2, 5) if c * 10**e <= max(m // 2, 1)}
        )
        ks = [check_int("k_plus", k, minimum=1, maximum=m) for k in (candidates or default)]
        multiplicity = f"Bonferroni over {len(ks)} values of k+ (k- = 0)"
    level = (1.0 - confidence) / len(ks)
    best = (0.0, ks[0], *one_run_guesses(scores, included, ks[0], 0))
    for k in ks:
        r, v = one_run_guesses(scores, included, k, 0)
        mu = one_run_gdp_mu(m, r, v, level=level)
        if mu > best[0]:
            best = (mu, k, r, v)
    mu_lower, k, r, v = best
    eps = float(gdp_epsilon(delta, mu_lower)) if mu_lower > 0 else 0.0
    return OneRunResult(
        method="one_run_fdp",
        eps_lower=eps,
        delta=delta,
        confidence=confidence,
        guarantee=Guarantee(
            statement="eps_delta_lower_bound",
            assumption="gaussian_tradeoff",
            held_out=True,
            multiplicity=multiplicity,
            certified=f"not mu-GDP for any mu < {mu_lower:.6g}",
        ),
        num_canaries=m,
        k_plus=k,
        k_minus=0,
        num_guesses=r,
        num_correct=v,
        extras={"mu_lower": mu_lower, "level": level, "n_candidates": len(ks)},
    )
