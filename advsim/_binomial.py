r"""Fast draws of Binomial(n, q) group counts for huge n: an exact inverse-CDF table.

`jax.random.binomial` draws each value by rejection (BTRS), about 330 ns a draw on this
machine's CPU; a group of $n = 10^{10}$ examples drawn at every step of every run then
costs several times the rest of the step. For a fixed $(n, q)$ the law is the same at every
draw, so one table of its CDF, built once on the host, turns each draw into one uniform and
a binary search (`BinomialTable`: 111-151 ns against 912-1000 ns per draw at q = 0.01 and
0.5, measured with `scripts/benchmark_sampling.py` on 2 shared CPU cores).

Exactness (the guarantee `BinomialTable` states): the table covers the window
$W = [lo, hi]$ outside which each tail of Binomial(n, q) has mass at most $2^{-64}$ (a
Chernoff bound, $\Pr[X \ge k] \le e^{-n\,\mathrm{KL}(k/n \| q)}$ for $k \ge nq$ and its
mirror, evaluated with a margin of $e^{-1}$), and holds the CDF of Binomial(n, q)
conditioned on $W$, computed from the exact pmf ratio $p_{k+1}/p_k = (n-k)q / ((k+1)(1-q))$
in extended precision and rounded to float64. A draw is $lo + \#\{i : F_i \le U\}$, the
inverse CDF of a uniform $U$ on the grid $2^{-52}\{0, \ldots, 2^{52}-1\}$. So every atom's
probability is that of Binomial(n, q) up to the 52-bit resolution of $U$ and the float64
rounding of the CDF, and the atoms outside $W$ (total mass at most $2^{-63}$, far below
what $U$ can resolve) are never drawn. Conditioning on $W$, rather than falling back to
`jax.random.binomial` when $U$ lands beyond the table, is what keeps the law exact: an
independent fallback draw would put the mass of the tails back on every atom (a mixture
at total variation $\Pr[X \notin W]$ from the binomial), not on the tails.

`RoundedNormalBinomial` ($\mathrm{round}(nq + \sqrt{nq(1-q)}\,Z)$) is an approximation
(total variation about $1.2 \cdot 10^{-5}$ at $n = 10^{10}$, $q = 0.01$): the engine uses it
only when asked by name (`simulate(..., binomial="normal_approx")`), never by default.
"""

from __future__ import annotations

import abc
import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

__all__ = [
    "AbstractBinomialSampler",
    "BinomialTable",
    "RoundedNormalBinomial",
    "binomial_table",
    "binomial_window",
]

#: Each tail of Binomial(n, q) left outside a table's window has mass <= 2^-TAIL_BITS.
TAIL_BITS = 64
#: The largest table (entries; 8 bytes each) built: beyond, `binomial_table` refuses.
MAX_TABLE_SIZE = 2**22


class AbstractBinomialSampler(eqx.Module):
    """Draws of one group's count, Binomial(n, q) with n and q fixed at construction."""

    @abc.abstractmethod
    def sample(self, shape: tuple[int, ...], *, key: PRNGKeyArray) -> Int[Array, ...]:
        """int64 draws of the given shape, a pure function of `key`."""


class BinomialTable(AbstractBinomialSampler):
    r"""Exact inverse-CDF draws from Binomial(n, q) through a float64 table of its CDF.

    Build it with `binomial_table(n, q)`. A draw is $lo + \#\{i : F_i \le U\}$ with $U$
    uniform on $2^{-52}\{0, \ldots, 2^{52} - 1\}$ (`jax.random.uniform` in float64) and
    $F_i$ the CDF of Binomial(n, q) conditioned on the window $W = [lo, hi]$, whose tails
    outside have mass $\le 2^{-64}$ each. Hence, for every k,
    $|\Pr[\text{draw} = k] - \binom{n}{k} q^k (1-q)^{n-k}| \le 2^{-52} + 2\rho + 2^{-63}$,
    where $\rho$ bounds the float64 error of the tabulated CDF (rounding, $2^{-53}$, plus
    the extended-precision summation; the tests check $\rho < 10^{-14}$ against mpmath at
    $n = 10^{10}$): exact up to the float rounding of the CDF and the resolution of $U$.
    The table is padded with ones to a power-of-two length (the search is a branchless
    binary search), so one compiled function serves every (n, q) whose table has the
    same padded length.

    Needs `jax_enable_x64` when sampling (float64 uniforms and CDF, int64 counts).

    Example:
        >>> import jax
        >>> jax.config.update("jax_enable_x64", True)
        >>> table = binomial_table(10**10, 0.01)
        >>> draws = table.sample((1000,), key=jax.random.key(0))
        >>> abs(float(draws.mean()) / 1e8 - 1) < 1e-4
        True
    """

    lo: Int[Array, ""]
    cdf: Float[Array, " L"]
    count: Int[Array, ""]  # n and q, for the record (arrays: no recompilation per q)
    sampling_prob: Float[Array, ""]

    def __init__(self, lo, cdf, count: int, sampling_prob: float):
        size = np.shape(cdf)[0]
        if size < 1 or size & (size - 1):
            raise ValueError(f"cdf must have a power-of-two length (pad with 1.0), got {size}")
        self.lo = np.asarray(lo, np.int64)
        self.cdf = np.asarray(cdf, np.float64)
        self.count = np.asarray(count, np.int64)
        self.sampling_prob = np.asarray(sampling_prob, np.float64)

    def sample(self, shape: tuple[int, ...], *, key: PRNGKeyArray) -> Int[Array, ...]:
        if not jax.config.jax_enable_x64:
            raise RuntimeError("BinomialTable.sample needs jax_enable_x64 (float64 CDF, int64)")
        u = jax.random.uniform(key, shape, jnp.float64)
        return jnp.asarray(self.lo, jnp.int64) + _count_at_most(self.cdf, u).astype(jnp.int64)


def _count_at_most(cdf: Float[Array, " L"], u: Float[Array, ...]) -> Int[Array, ...]:
    """#{i : cdf[i] <= u} for a sorted `cdf` of power-of-two length 2^p (padded with 1.0):
    a branchless binary search, p unrolled steps of `i += s if cdf[i + s - 1] <= u` for
    s = 2^(p-1), ..., 1 (equal to `jnp.searchsorted(cdf, u, side="right")`, 3x faster
    on CPU: the steps fuse into one pass instead of one pass over the draws per step)."""
    cdf = jnp.asarray(cdf)
    size = cdf.shape[0]
    if size & (size - 1):
        raise ValueError(f"the table's length must be a power of two, got {size}")
    index = jnp.zeros(u.shape, jnp.int32)
    step = size // 2
    while step >= 1:
        index = index + jnp.where(cdf[index + (step - 1)] <= u, step, 0)
        step //= 2
    return index


class RoundedNormalBinomial(AbstractBinomialSampler):
    r"""APPROXIMATE Binomial(n, q) draws: $\mathrm{clip}(\mathrm{round}(nq +
    \sqrt{nq(1-q)}\,Z), 0, n)$ with $Z \sim \mathcal{N}(0, 1)$.

    Not the binomial: its total variation from Binomial(n, q) is of order
    $1/\sqrt{nq(1-q)}$ times the skewness (about $1.2 \cdot 10^{-5}$ at $n = 10^{10}$,
    $q = 0.01$). Use it only where that error is acceptable and stated; the engine never
    picks it by default (`simulate(..., binomial="normal_approx")`).
    """

    count: Int[Array, ""]
    sampling_prob: Float[Array, ""]

    def __init__(self, count: int, sampling_prob: float):
        self.count = np.asarray(count, np.int64)
        self.sampling_prob = np.asarray(sampling_prob, np.float64)

    def sample(self, shape: tuple[int, ...], *, key: PRNGKeyArray) -> Int[Array, ...]:
        if not jax.config.jax_enable_x64:
            raise RuntimeError("RoundedNormalBinomial.sample needs jax_enable_x64")
        n = jnp.asarray(self.count, jnp.float64)
        q = jnp.asarray(self.sampling_prob, jnp.float64)
        z = jax.random.normal(key, shape, jnp.float64)
        x = jnp.round(n * q + jnp.sqrt(n * q * (1.0 - q)) * z)
        return jnp.clip(x, 0, n).astype(jnp.int64)


def _chernoff_exponent(n: int, q: float, k: int) -> float:
    """n KL(k/n || q), the exponent of the Chernoff bound on Binomial(n, q)'s tail at k."""
    if k <= 0:
        return -n * math.log1p(-q)
    if k >= n:
        return -n * math.log(q)
    delta = k - n * q  # the first-order terms cancel between the two logs: log1p forms
    return k * math.log1p(delta / (n * q)) + (n - k) * math.log1p(-delta / (n * (1.0 - q)))


def binomial_window(count: int, sampling_prob: float, tail_bits: int = TAIL_BITS) -> tuple:
    r"""$(lo, hi)$: $\Pr[X < lo] \le 2^{-b}$ and $\Pr[X > hi] \le 2^{-b}$ for
    $X \sim$ Binomial(count, sampling_prob), $b$ = `tail_bits`.

    By the Chernoff bound $\Pr[X \ge k] \le e^{-n\,\mathrm{KL}(k/n \| q)}$ ($k \ge nq$;
    mirrored below), with the exponent required to exceed $b \log 2 + 1$ (the 1 absorbs
    the float64 error of the exponent, about $10^{-11}$ at $n = 10^{10}$).

    Example:
        >>> lo, hi = binomial_window(10**10, 0.01)
        >>> lo < 10**8 < hi, 9 < (hi - 10**8) / 9950 < 10
        (True, True)
    """
    n, q = int(count), float(sampling_prob)
    if not (0.0 < q < 1.0) or n < 1:
        raise ValueError(f"need count >= 1 and sampling_prob in (0, 1), got {n}, {q}")
    need = tail_bits * math.log(2.0) + 1.0
    mean = n * q

    def boundary(near: int, far: int) -> int:
        # Bisection, keeping exponent(near) < need <= exponent(far): the k between them
        # nearest the mean with exponent >= need (it grows away from the mean).
        while abs(far - near) > 1:
            mid = (near + far) // 2
            if _chernoff_exponent(n, q, mid) >= need:
                far = mid
            else:
                near = mid
        return far

    # P[X >= k_hi] <= e^-need for the smallest such k_hi above the mean: hi = k_hi - 1;
    # likewise lo = k_lo + 1 below it. A tail that cannot reach the bound is kept whole.
    above, below = min(n, math.ceil(mean)), max(0, math.floor(mean))
    hi = n if _chernoff_exponent(n, q, n) < need else max(above, boundary(above, n) - 1)
    lo = 0 if _chernoff_exponent(n, q, 0) < need else min(below, boundary(below, 0) + 1)
    return int(lo), int(hi)


@functools.lru_cache(maxsize=64)
def _table_arrays(n: int, q: float, tail_bits: int) -> tuple[int, np.ndarray]:
    lo, hi = binomial_window(n, q, tail_bits)
    size = hi - lo + 1
    if size > MAX_TABLE_SIZE:
        raise ValueError(
            f"Binomial({n}, {q}) needs a table of {size} entries, more than "
            f"MAX_TABLE_SIZE = {MAX_TABLE_SIZE}; draw it with jax.random.binomial"
        )
    ld = np.longdouble
    # (n + 1) q to the full precision of float64 arithmetic: n + 1 and q are exact in
    # longdouble where it has a 64-bit mantissa (x86), and so is their product's rounding
    # well below float64's; elsewhere longdouble is float64 and this is float64.
    c = ld(n + 1) * ld(q)
    k = np.arange(lo, hi, dtype=np.int64).astype(ld)  # ratio p_{k+1} / p_k for k in [lo, hi)
    # p_{k+1}/p_k = (n - k) q / ((k + 1)(1 - q)) = 1 + ((n + 1) q - (k + 1)) / ((k + 1)(1 - q))
    log_ratio = np.log1p((c - (k + 1)) / ((k + 1) * (ld(1) - ld(q))))
    log_w = np.concatenate([[ld(0)], np.cumsum(log_ratio)])  # log(p_k / p_lo)
    w = np.exp(log_w - log_w.max())
    partial = np.cumsum(w)
    cdf = (partial / partial[-1]).astype(np.float64)
    cdf[-1] = 1.0  # exactly: the last atom ends the window
    padded = np.ones(1 << int(size - 1).bit_length(), np.float64)  # the next power of two
    padded[:size] = cdf
    cdf = padded
    cdf.setflags(write=False)
    return lo, cdf


def binomial_table(
    count: int, sampling_prob: float, *, tail_bits: int = TAIL_BITS
) -> BinomialTable:
    """The exact inverse-CDF table of Binomial(count, sampling_prob) (see `BinomialTable`).

    Built on the host (numpy, extended precision) in O(window) time, about 20 sd wide
    (0.2 M entries, 1.6 MB at n = 10^10, q = 0.01); cached per (count, sampling_prob).

    Args:
        count: n >= 1 (any Python int up to 2^62).
        sampling_prob: q in (0, 1).
        tail_bits: each tail left outside the table has mass <= 2^-tail_bits.

    Raises:
        ValueError: bad n or q, or a window wider than `MAX_TABLE_SIZE`.
    """
    n, q = int(count), float(sampling_prob)
    lo, cdf = _table_arrays(n, q, int(tail_bits))
    return BinomialTable(lo, cdf, n, q)
