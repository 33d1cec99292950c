r"""The likelihood-encoding loss: the last model stores the optimal test of every step.

Algorithm 1 of Annamalai (2024), "It's Our Loss: No Privacy Amplification for Hidden State
DP-SGD With Non-Convex Loss", Sections 4.1-4.3. One dimension, $\eta = C = 1$, the
datasets $D = \{0, \ldots, 0\}$ ($|D|$ zeros, default $10^{10}$: the paper's "10B") and
$D' = D \cup \{1\}$. The model is $\theta = s\,S + v$: the high digits ($s$ a power of ten
above $3\sigma$) hold $S = \sum_{i<k} \mathrm{round}(10^{d} L(v_i))$, the running sum of
the per-step log-likelihood ratios rounded to $d$ decimals (default 2), and the low part
$v$ the raw value of the last step. At every step each example's gradient

1. decodes the previous iterate: $L_{k-1} = s\,\mathrm{round}(\theta_k / s)$,
   $v_k = \theta_k - L_{k-1}$;
2. runs the optimal (Neyman-Pearson) test of the step, $L(v) = \log(q\,\mathcal{N}(v; 1,
   \sigma^2)/\mathcal{N}(v; 0, \sigma^2) + 1 - q) = \mathrm{logaddexp}(\log q + (2v - 1)
   / (2\sigma^2), \log(1 - q))$ (no overflow at any v);
3. re-encodes: writes $s\,\mathrm{round}(10^{d} L(v_k))$ into the high digits and removes
   $v_k$, spread over the $N = q|D|$ examples expected in the batch, so no single
   gradient comes near the clipping norm;

and at $\theta = 0$ (the first step) it is just the example $x$. So after step $k$,
$\theta = s\,(S_{k-1} + \mathrm{round}(10^d L(v_k))) + b_{k+1} + \xi_{k+1}$ and the last
model holds the sum of all T tests plus the raw last step
(`advsim.adversaries.LikelihoodSumDecoder` reads it).

Sign: the engine descends, $\theta \leftarrow \theta - \eta(\sum g + \xi)$, while the
paper's Algorithm 1 is written for an update that adds its gradient, so every gradient
here is the negative of the paper's $\tilde g$: an example $x$ gets
$g(x, \theta) = (v - \mathrm{enc})/N - x$ (and $-x$ at $\theta = 0$). The canary's
gradient is the zeros' plus $-1$: it is $1 \pm 10^{-8}$ in norm and the engine clips it to
1 when above, a change of $< 10^{-8}$.

Deviation from the paper's analysis, measured and stated: under Poisson sampling the
engine draws $n_t \sim \mathrm{Binom}(|D|, q)$ zeros; the zeros' summed gradient is then
$(n_t / N)(v - \mathrm{enc})$, so $v_{k+1}$ receives the extra term $(n_t/N - 1)
(\mathrm{enc} - v)$, of relative size $\sqrt{(1 - q)/(q|D|)}$ ($10^{-4}$ at $q = 0.01$,
$|D| = 10^{10}$) times $|\mathrm{enc}|$ (up to $10^3$-$10^4$): a little extra noise in
the next step, real DP-SGD behaviour. Likewise a step whose $|v|$ reaches $s/2$ (the
"68-95-99.7" rule leaves a probability $\Pr[|b + \xi| > s/2]$, $10^{-6}$ at $\sigma = 1$,
1.2% at $\sigma = 2$) is decoded into the wrong ten: the sum is off by $\pm 10^{-d}$ and
the step's test reads the wrong $v$. Both only garble the observation; neither can
raise the leakage above composition. The wraps matter in the tails that set epsilon:
at q = 0.1, T = 100, eps = 2 (sigma = 2.25, so the paper's rule gives s = 10 and a step
wraps with probability ~2.6%) the trade-off audit of 10^5 runs per world gives a held-out
estimate of 1.4 and a certified 1.2 with s = 10, but 2.1 and 1.8 with `scale=100`
(measured); `scale="wrap_free"` ($s/2 \ge 1 + 4\sigma$) avoids this.

Float64 is required (`requires_x64`): the group count $|D| = 10^{10}$ does not fit in
int32 (the engine draws int64 counts under x64), and float32's 24-bit mantissa holds
$s S + v$ with $|\theta|$ up to ~$10^4$ only to ~$5 \cdot 10^{-4}$ while $n_t g$ is
inexact: the same draws through Algorithm 1 in float32 decode a wrong sum in several
percent of the runs (5.5% measured at q = 0.1, T = 100, sigma = 0.84; float64: none),
and those errors sit in the tails that set epsilon. The constructor refuses to build
without `jax.config.update("jax_enable_x64", True)`.
"""

from __future__ import annotations

import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim import AbstractSumEncoding, DPSGDParams
from advsim.validation import check_int

__all__ = ["LikelihoodEncodingLoss", "encoding_scale", "step_log_likelihood_ratio"]

_X64_MESSAGE = (
    "LikelihoodEncodingLoss needs float64: its model stores a running sum of up to "
    "~10^5 in its high digits and a raw O(1) value in its low digits, and its dataset of "
    "{dataset_size} zeros does not fit in int32; float32 (24-bit mantissa) corrupts the "
    "decoding. Call jax.config.update('jax_enable_x64', True) before building it."
)


def encoding_scale(noise_multiplier: float, rule: str = "paper") -> float:
    r"""The encoding scale $s$ (a power of ten) for noise multiplier $\sigma$.

    - `"paper"`: the closest power of ten above $3\sigma$ (Section 4.2), strictly above:
      $s = 10^{\lfloor \log_{10} 3\sigma \rfloor + 1}$. A step decodes correctly while
      $|v| < s/2$, which this rule does not guarantee: at $\sigma = 2.25$ it gives
      $s = 10$ and about 2.6% of the canary's steps wrap (see the module docstring).
    - `"wrap_free"`: the smallest power of ten with $s/2 \ge 1 + 4\sigma$, so a step
      wraps with probability $< 3.2 \cdot 10^{-5}$. A larger s also multiplies the
      batch-size fluctuation term $(n_t/N - 1)\,\mathrm{enc}$ by 10, so it is not
      free either; it equals the paper's s whenever $1 + 4\sigma < s_{paper}/2$.

    Example:
        >>> encoding_scale(1.0), encoding_scale(0.5), encoding_scale(4.0)
        (10.0, 10.0, 100.0)
        >>> encoding_scale(2.25), encoding_scale(2.25, "wrap_free")
        (10.0, 100.0)
    """
    sigma = float(noise_multiplier)
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"noise_multiplier must be finite and > 0, got {noise_multiplier!r}")
    if rule == "paper":
        return 10.0 ** (math.floor(math.log10(3.0 * sigma)) + 1)
    if rule == "wrap_free":
        return 10.0 ** math.ceil(math.log10(2.0 * (1.0 + 4.0 * sigma)))
    raise ValueError(f"rule must be 'paper' or 'wrap_free', got {rule!r}")


def step_log_likelihood_ratio(v, sampling_prob, noise_multiplier):
    r"""$L(v) = \log(q\,e^{(2v - 1)/(2\sigma^2)} + 1 - q)$, the log-likelihood ratio of
    one step (Section 4.1), as `logaddexp` so that no $v$ overflows (jittable).

    Example:
        >>> round(float(step_log_likelihood_ratio(0.5, 0.1, 1.0)), 6)  # log(0.1 + 0.9)
        0.0
    """
    v = jnp.asarray(v)
    q = jnp.asarray(sampling_prob, v.dtype)
    sigma = jnp.asarray(noise_multiplier, v.dtype)
    return jnp.logaddexp(jnp.log(q) + (2.0 * v - 1.0) / (2.0 * sigma**2), jnp.log1p(-q))


class LikelihoodEncodingLoss(AbstractSumEncoding):
    r"""DP-SGD with the likelihood-encoding loss of Annamalai (2024), Algorithm 1.

    See the module docstring. One group of `dataset_size` zeros (Poisson-sampled with
    rate q, so their number per batch is $\mathrm{Binom}(|D|, q)$) and the canary $x = 1$,
    sampled with the same rate at every step. $N = q|D|$ is public and fixed.

    Args:
        steps: T >= 1.
        sampling_prob: q in (0, 1).
        noise_multiplier: sigma > 0.
        dataset_size: |D|, the number of zeros (default 10^10, the paper's "10B").
        decimals: d, the decimals of L(v) kept per step (default 2, the paper's).
        scale: s, a power of ten, or a rule of `encoding_scale`: "wrap_free" (default:
            s/2 >= 1 + 4 sigma, so steps decode correctly) or "paper" (the closest power
            of ten above 3 sigma, which wraps 2.6% of the steps at sigma = 2.25 and
            loses leakage there: measured eps_point 1.40 instead of 2.00 at q = 0.1,
            T = 100, eps = 2; the two rules agree for sigma < 1 and at sigma = 1).
        clip_norm: C; must be 1 (the construction's units, Section 4: eta = C = 1).
        learning_rate: eta; must be 1.

    Raises:
        ValueError: bad values, or N = q|D| too small to keep the zeros' gradient
            unclipped (it must exceed twice the largest |v - enc|).
        RuntimeError: jax_enable_x64 is off (the construction needs float64).

    Example:
        >>> import jax
        >>> jax.config.update("jax_enable_x64", True)
        >>> mech = LikelihoodEncodingLoss(steps=10, sampling_prob=0.1, noise_multiplier=1.0)
        >>> float(mech.scale), float(mech.expected_batch)
        (10.0, 1000000000.0)
    """

    params: DPSGDParams
    dataset_size: np.ndarray
    expected_batch: np.ndarray
    scale: np.ndarray
    decimals: int = eqx.field(static=True)

    requires_x64: ClassVar[bool] = True

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        dataset_size: int = 10**10,
        decimals: int = 2,
        scale: float | str = "wrap_free",
        clip_norm: float = 1.0,
        learning_rate: float = 1.0,
    ):
        # Poisson batches and a canary that every step may sample: the encoding's law.
        self.params = DPSGDParams(
            steps, sampling_prob, noise_multiplier, clip_norm=clip_norm, learning_rate=learning_rate
        )
        for name, value in (("clip_norm", clip_norm), ("learning_rate", learning_rate)):
            if float(value) != 1.0:
                raise ValueError(
                    f"{name} must be 1 (Algorithm 1 works in units of eta * C = 1 and "
                    f"the adversary decodes in them), got {value!r}"
                )
        q = float(self.sampling_prob)
        if not q < 1.0:
            raise ValueError(f"sampling_prob must be in (0, 1) (Poisson sampling), got {q!r}")
        dataset_size = check_int("dataset_size", dataset_size, minimum=1, maximum=2**62)
        if not jax.config.jax_enable_x64:
            raise RuntimeError(_X64_MESSAGE.format(dataset_size=dataset_size))
        self.decimals = check_int("decimals", decimals, minimum=0, maximum=6)
        sigma = float(self.noise_multiplier)
        if isinstance(scale, str):
            scale = encoding_scale(sigma, scale)
        scale = float(scale)
        if not (scale > 0 and math.isclose(10 ** round(math.log10(scale)), scale)):
            raise ValueError(f"scale must be a positive power of ten, got {scale!r}")
        self.scale = np.asarray(scale, np.float64)
        self.dataset_size = np.asarray(dataset_size, np.int64)
        n = q * dataset_size
        self.expected_batch = np.asarray(n, np.float64)
        needed = 2.0 * self.max_update()
        if n < needed:
            raise ValueError(
                f"sampling_prob * dataset_size = {n:.6g} must be >= {needed:.6g} (twice the "
                "largest |v - enc|, so that no zero's gradient is clipped); raise dataset_size"
            )

    def max_update(self) -> float:
        """A bound on |v - enc| over decodable v (|v| <= s/2): the zeros' summed update."""
        s, q, sigma = float(self.scale), float(self.sampling_prob), float(self.noise_multiplier)
        top = np.logaddexp(math.log(q) + (s - 1.0) / (2.0 * sigma**2), math.log1p(-q))
        largest = max(abs(top), abs(math.log1p(-q)))
        return s / 2.0 + s * (10.0**self.decimals * largest + 1.0)

    # -- Algorithm 1 ----------------------------------------------------------------------

    def init_model(self) -> Float[Array, " d"]:
        return jnp.zeros((1,), jnp.float64)

    def decode(self, model: Float[Array, " d"]) -> tuple:
        """(s round(theta / s), v): the encoded sum and the raw last value (lines 4-5)."""
        s = jnp.asarray(self.scale, model.dtype)
        high = s * jnp.round(model / s)
        return high, model - high

    def encode(self, v: Float[Array, " d"]) -> Float[Array, " d"]:
        """s round(10^d L(v)) (lines 6-7)."""
        s = jnp.asarray(self.scale, v.dtype)
        llr = step_log_likelihood_ratio(v, self.sampling_prob, self.noise_multiplier)
        return s * jnp.round(llr * 10.0**self.decimals)

    def per_example_gradient(self, x, model: Float[Array, " d"]) -> Float[Array, " d"]:
        """-g~(x, theta) of Algorithm 1: (v - enc)/N - x, and -x at theta = 0 (line 1-2)."""
        _, v = self.decode(model)
        n = jnp.asarray(self.expected_batch, model.dtype)
        x = jnp.asarray(x, model.dtype)
        return jnp.where(model == 0, -x, (v - self.encode(v)) / n - x)

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        return self.per_example_gradient(1.0, model)

    def data_gradients(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, "g d"]:
        return self.per_example_gradient(0.0, model)[None, :]

    def data_counts(self) -> Int[Array, " g"]:
        return jnp.asarray(self.dataset_size, jnp.int64)[None]

    def decoded_sum(self, model: Float[Array, " d"]) -> Float[Array, ""]:
        r"""$o = (\theta - N g(0, \theta)) / (10^d s) \approx L_T$ (Section 4.3): one more
        decode-test-encode on `model`, read back in units of L."""
        n = jnp.asarray(self.expected_batch, model.dtype)
        high = model - n * self.per_example_gradient(0.0, model)
        return high[0] / (jnp.asarray(self.scale, model.dtype) * 10.0**self.decimals)

    @classmethod
    def contract_examples(cls) -> dict[str, LikelihoodEncodingLoss]:
        """Small instances, by name, for the contract suite (they need `jax_enable_x64`)."""
        return {"default": cls(3, 0.2, 1.0)}
