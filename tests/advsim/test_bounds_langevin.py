"""Tests for the Renyi-DP hidden-state bounds of _langevin.py.

Formula 1 (noisy GD, Chourasia, Ye & Shokri, arXiv:2102.05855): no number printed by the
paper or its authors could be reached (the paper is theoretical; its text could not be
retrieved), so it is tested against an independent derivation: in a 1-D linear model
(quadratic regulariser of curvature a, a canary with constant gradient), the last
iterates of the two runs are Gaussians with equal variances, and their exact Renyi
divergence alpha * shift^2 / (2 var) must never exceed the bound; plus the limits (one
step vs the Gaussian mechanism, T -> infinity, at most twice composition, monotone in T)
and the mapping onto the paper's parameterisation.

Formula 2 (shuffled noisy mini-batch GD, Ye & Shokri, arXiv:2203.05363): reproduces the
noise multipliers that the authors' README prints for their privacy-dynamics runs
(github.com/privacytrustlab/dp_dynamics@84a5cf9, README.md), each the smallest value to two
decimals that meets the printed target epsilon under the authors' own accounting
(dp_utils.priv_dynamics_guarantees, converted by Opacus' get_privacy_spent); and checks
the formula against the exact joint-convexity bound of the linear model's Gaussian
mixtures.
"""

import itertools
import math

import numpy as np
import pytest

from advsim.bounds._langevin import (
    ASSUMPTIONS,
    REFERENCE,
    LangevinBound,
    chourasia_rdp,
    langevin_bound,
    langevin_epsilon,
    langevin_rdp,
)
from advsim.bounds._renyi import renyi_epsilon
from advsim.bounds._shuffled import (
    SGD_ASSUMPTIONS,
    noisy_sgd_epsilon,
    noisy_sgd_rdp,
    ye_shokri_rdp,
)

RUN = dict(
    noise_multiplier=1.3, clip_norm=2.0, lipschitz=1.5, strong_convexity=0.4, smoothness=3.0,
    learning_rate=0.2, num_examples=50,
)  # fmt: skip
ALPHAS = (1.01, 1.5, 2.0, 8.0, 64.0, 1000.0)


# ---------------------------------------------------------------- formula 1: noisy GD


def linear_exact_rdp(alpha, steps, lr, curvature, sigma, clip):
    """Exact Renyi divergence of the last iterates of x_t = x_{t-1} - lr (a x_{t-1} -/+ C
    [canary in] + N(0, sigma^2 C^2)), same fixed start: means differ by
    lr C sum_{k<T} (1 - lr a)^k, the variance is (lr sigma C)^2 sum_{k<T} (1 - lr a)^(2k)."""
    c = 1.0 - lr * curvature
    shift = lr * clip * sum(c**k for k in range(steps))
    var = (lr * sigma * clip) ** 2 * sum(c ** (2 * k) for k in range(steps))
    return alpha * shift**2 / (2.0 * var)


@pytest.mark.parametrize("lr,curv,sigma,clip", [
    (0.1, 1.0, 1.0, 1.0), (0.5, 1.9, 2.0, 0.5), (0.01, 0.5, 0.7, 3.0), (0.999, 1.0, 1.0, 1.0),
])  # fmt: skip
@pytest.mark.parametrize("steps", [1, 2, 3, 10, 100, 5000])
def test_noisy_gd_bound_dominates_the_exact_linear_case(lr, curv, sigma, clip, steps):
    # F = a x^2 / 2 in both worlds (m = M = a), the canary's gradient has norm C = L.
    for alpha in ALPHAS:
        bound = langevin_rdp(
            alpha, steps=steps, noise_multiplier=sigma, clip_norm=clip, lipschitz=clip,
            strong_convexity=curv, smoothness=curv, learning_rate=lr, num_examples=1,
        )  # fmt: skip
        exact = linear_exact_rdp(alpha, steps, lr, curv, sigma, clip)
        # Over 0 < lr a < 1 and all T the ratio is at least 4 (1 - e^{-1/2}) = 1.57.
        assert bound >= 1.57 * exact


def test_noisy_gd_matches_the_paper_parameterisation():
    # eta = lr n, sigma_p^2 = lr sigma^2 C^2 / (2 n), lambda = m / n, beta = M / n, S_g = s1.
    for n, neighbouring, s1 in [(1, "add_remove", 1.5), (50, "add_remove", 1.5),
                                (7, "replace_one", 3.0)]:  # fmt: skip
        run = {**RUN, "num_examples": n, "neighbouring": neighbouring}
        lr, sig, c = run["learning_rate"], run["noise_multiplier"], run["clip_norm"]
        for steps in (1, 13, 400):
            for alpha in (1.5, 9.0):
                paper = chourasia_rdp(
                    alpha, eta=lr * n, sigma=math.sqrt(lr * sig**2 * c**2 / (2 * n)),
                    lam=run["strong_convexity"] / n, beta=run["smoothness"] / n,
                    sensitivity=s1, n=n, steps=steps,
                )  # fmt: skip
                ours = langevin_rdp(alpha, steps=steps, **run)
                assert ours == pytest.approx(paper, rel=1e-12)


def test_chourasia_rdp_is_the_stated_formula():
    # 4 alpha L^2 / (lambda sigma^2 n^2) (1 - exp(-lambda eta K / 2)), S_g = 2L (LaRiffle/
    # langevin compute/privacy.py, constant step size).
    alpha, lip, lam, sigma, n, eta, k = 3.0, 0.7, 0.05, 0.3, 20, 0.8, 37
    want = 4 * alpha * lip**2 / (lam * sigma**2 * n**2) * (1 - math.exp(-lam * eta * k / 2))
    got = chourasia_rdp(alpha, eta=eta, sigma=sigma, lam=lam, beta=1.2, sensitivity=2 * lip,
                        n=n, steps=k)  # fmt: skip
    assert got == pytest.approx(want, rel=1e-13)


def test_noisy_gd_limits():
    one_step_gaussian = RUN["lipschitz"] ** 2 / (2 * RUN["noise_multiplier"] ** 2
                                                 * RUN["clip_norm"] ** 2)  # fmt: skip
    first = langevin_bound(1, **RUN)
    # One step: at least the Gaussian mechanism's alpha s^2 / (2 s_noise^2) (here close to
    # twice it), at most twice composition.
    assert one_step_gaussian <= first.rho <= 2 * one_step_gaussian
    previous = 0.0
    for steps in (1, 2, 5, 30, 300, 3000, 10**6):
        b = langevin_bound(steps, **RUN)
        assert isinstance(b, LangevinBound)
        # increasing in T (until it reaches the limit in floating point), below the limit
        assert previous < b.rho <= b.rho_limit or previous == b.rho == b.rho_limit
        assert b.rho <= 2 * b.rho_composition
        assert b.rho_composition == pytest.approx(steps * one_step_gaussian)
        previous = b.rho
    assert langevin_bound(10**6, **RUN).rho == pytest.approx(
        2 * RUN["lipschitz"] ** 2 / (RUN["strong_convexity"] * RUN["learning_rate"]
                                     * RUN["noise_multiplier"] ** 2 * RUN["clip_norm"] ** 2)
    )  # fmt: skip
    # Replacing one example doubles the sensitivity: four times the divergence.
    assert langevin_bound(40, **RUN, neighbouring="replace_one").rho == pytest.approx(
        4 * langevin_bound(40, **RUN).rho
    )
    assert first.assumptions == ASSUMPTIONS and first.reference == REFERENCE
    assert "arXiv:2102.05855" in REFERENCE


def test_noisy_gd_epsilon():
    b = langevin_bound(200, **RUN, delta=1e-5)
    want = renyi_epsilon(1e-5, lambda a: b.rho * a)
    assert b.epsilon == pytest.approx(want, rel=1e-12) and b.delta == 1e-5
    assert langevin_epsilon(1e-5, steps=200, **RUN) == pytest.approx(want, rel=1e-12)
    assert langevin_bound(200, **RUN).epsilon is None
    louder = {**RUN, "noise_multiplier": 2.6}
    assert langevin_epsilon(1e-5, steps=200, **louder) < want


# ------------------------------------------------- formula 2: shuffled noisy mini-batch GD

# Opacus 0.x (the authors' environment): RDP orders of dp_utils.ORDERS and
# get_privacy_spent's conversion eps = min_alpha rdp(alpha) - log(delta) / (alpha - 1).
AUTHOR_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


#: A shuffled noisy mini-batch GD run inside the assumptions of formula 2.
SGD = dict(
    epochs=5, batch_size=10, noise_multiplier=2.0, clip_norm=1.0, lipschitz=1.0,
    strong_convexity=1.0, smoothness=10.0, learning_rate=0.1, num_examples=100,
)  # fmt: skip


def authors_epsilon(rdp, delta=1e-5):
    return min(rdp(a) - math.log(delta) / (a - 1) for a in AUTHOR_ORDERS)


# The runs the README of github.com/privacytrustlab/dp_dynamics@84a5cf9 prints: section
# "Linear models trained on hand-crafted features" (the three `baselines_feature_clip.py`
# commands "using our pivacy dynamics analysis", target (epsilon=3, delta=10^-5)) and
# section "Linear models fine-tuned using pre-trained models" (the `transfer.transfer_cifar`
# command "with our privacy dynamics analysis", target (epsilon = 2, delta = 10^-5)).
# n: MNIST/FMNIST 60000, CIFAR-10 50000 training examples. BN runs add the RDP of the
# private normalisation, 2 * compute_rdp(q=1, bn_noise_multiplier) = alpha / bn^2
# (dp_utils.scatter_normalization). The smoothness is the one the code's applicability
# check uses, (max_data_norm^2 + 1) / 2 + l2_reg.
README_RUNS = [
    # name, n, batch, lr, printed noise multiplier, epochs, l2_reg, max_data_norm, BN noise, target
    ("mnist", 60000, 2048, 0.75, 3.08, 1200, 0.08, 2.0, 8.0, 3.0),
    ("fmnist", 60000, 2048, 1.92, 3.01, 1200, 0.02, 1.0, None, 3.0),
    ("cifar10", 50000, 2048, 0.75, 3.23, 1200, 0.08, 2.0, 6.0, 3.0),
    ("transfer", 50000, 1024, 1.92, 4.20, 600, 0.02, 1.0, None, 2.0),
]


@pytest.mark.parametrize("name,n,b,lr,sigma,epochs,l2,data_norm,bn,target", README_RUNS)
def test_reproduces_the_noise_multipliers_the_authors_print(
    name, n, b, lr, sigma, epochs, l2, data_norm, bn, target
):
    beta = (data_norm**2 + 1) / 2 + l2

    def eps(s):
        def rdp(a):
            norm = 0.0 if bn is None else a / bn**2
            return norm + ye_shokri_rdp(a, epochs=epochs, batch_size=b, num_examples=n,
                                        l2_reg=l2, lr=lr, noise_multiplier=s,
                                        smoothness=beta)  # fmt: skip

        return authors_epsilon(rdp)

    # The printed multiplier meets the target (the authors' bisection stops within 0.01
    # below it) and 0.01 less does not: it is the printed target to the printed digits.
    assert target - 0.01 <= eps(sigma) <= target
    assert eps(round(sigma - 0.01, 2)) > target


def test_noisy_sgd_matches_the_authors_parameterisation():
    # advsim lr = eta / b, m = b l2_reg, M = b beta; s1 = 2C (clip norm as gradient bound).
    eta, l2, beta, b, n, sigma, clip = 1.3, 0.05, 1.0, 32, 1000, 2.5, 0.7
    for epochs in (1, 2, 9, 200):
        for alpha in (1.1, 3.0, 40.0):
            theirs = ye_shokri_rdp(alpha, epochs=epochs, batch_size=b, num_examples=n,
                                   l2_reg=l2, lr=eta, noise_multiplier=sigma,
                                   smoothness=beta)  # fmt: skip
            ours = noisy_sgd_rdp(alpha, epochs=epochs, batch_size=b, noise_multiplier=sigma,
                                 clip_norm=clip, lipschitz=clip, strong_convexity=b * l2,
                                 smoothness=b * beta, learning_rate=eta / b,
                                 num_examples=n)  # fmt: skip
            assert ours == pytest.approx(theirs, rel=1e-12)


def _logmeanexp(x):
    top = max(x)
    return top + math.log(sum(math.exp(v - top) for v in x) / len(x))


@pytest.mark.parametrize("m,epochs,c,sigma", [
    (4, 3, 0.8, 1.0), (4, 3, 0.95, 1.0), (5, 4, 0.7, 2.0), (3, 6, 0.9, 1.0), (6, 2, 0.5, 1.0),
    (2, 5, 0.9, 0.7),
])  # fmt: skip
def test_noisy_sgd_bound_dominates_the_linear_mixture(m, epochs, c, sigma):
    # Linear model, the differing example's gradients +C / -C (replace one), all others 0:
    # given the positions p_k of its batch in each epoch the last iterates are Gaussians
    # with means -/+ lr C sum_k c^(T - t_k), variance (lr sigma C)^2 sum_{i<T} c^(2i); the
    # adversary sees the mixture over the shuffles, whose Renyi divergence is at most
    # log E exp((alpha - 1) D_alpha(components)) / (alpha - 1) (joint convexity).
    steps = m * epochs
    var_units = sigma**2 * sum(c ** (2 * i) for i in range(steps))
    shifts = [sum(c ** (steps - (k * m + p + 1)) for k, p in enumerate(ps))
              for ps in itertools.product(range(m), repeat=epochs)]  # fmt: skip
    b = 4  # batch size; n = m b examples; lr and m chosen to give the contraction c
    lr, curv = 0.1, (1.0 - c) / 0.1
    for alpha in (1.5, 2.0, 5.0, 10.0, 30.0):
        components = [alpha * (2 * s) ** 2 / (2 * var_units) for s in shifts]
        mixture = _logmeanexp([(alpha - 1) * v for v in components]) / (alpha - 1)
        bound = noisy_sgd_rdp(alpha, epochs=epochs, batch_size=b, noise_multiplier=sigma,
                              clip_norm=1.0, lipschitz=1.0, strong_convexity=curv,
                              smoothness=curv, learning_rate=lr, num_examples=m * b)  # fmt: skip
        assert bound >= mixture


def test_noisy_sgd_epsilon_and_assumptions():
    run = {**SGD, "epochs": 20}
    want = renyi_epsilon(1e-5, lambda a: noisy_sgd_rdp(a, **run))
    assert noisy_sgd_epsilon(1e-5, **run) == pytest.approx(want, rel=1e-12)
    assert noisy_sgd_epsilon(1e-5, **{**run, "noise_multiplier": 4.0}) < want
    assert any("shuffle" in a for a in SGD_ASSUMPTIONS)
    # More epochs never lower the bound.
    values = [noisy_sgd_rdp(3.0, **{**run, "epochs": k}) for k in (1, 2, 10, 100, 1000)]
    assert np.all(np.diff(values) >= 0)


# --------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("change,name", [
    (dict(alpha=1.0), "alpha"),
    (dict(alpha=0.5), "alpha"),
    (dict(steps=0), "steps"),
    (dict(noise_multiplier=0.0), "noise_multiplier"),
    (dict(clip_norm=-1.0), "clip_norm"),
    (dict(clip_norm=1.0), "clip_norm"),  # < lipschitz = 1.5
    (dict(lipschitz=0.0), "lipschitz"),
    (dict(strong_convexity=0.0), "strong_convexity"),
    (dict(smoothness=0.3), "smoothness"),  # < strong_convexity = 0.4
    (dict(learning_rate=0.34), "learning_rate"),  # lr M > 1: the theorem needs < 1
    (dict(learning_rate=0.0), "learning_rate"),
    (dict(num_examples=0), "num_examples"),
    (dict(neighbouring="swap"), "neighbouring"),
])  # fmt: skip
def test_noisy_gd_rejects_bad_input(change, name):
    args = dict(alpha=2.0, steps=10, **RUN)
    args.update(change)
    with pytest.raises(ValueError, match=name) as info:
        langevin_rdp(**args)
    value = change[name] if name in change else None
    if isinstance(value, float) and name not in ("clip_norm", "smoothness"):
        assert repr(value) in str(info.value)  # names the value too


def test_noisy_gd_error_messages_give_the_range():
    with pytest.raises(ValueError, match=r"learning_rate must be in \(0, 1/smoothness\) = "
                                         r"\(0, 0\.333333\).*got 0\.4"):  # fmt: skip
        langevin_rdp(2.0, steps=1, **{**RUN, "learning_rate": 0.4})
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\), got 0\.0"):
        langevin_epsilon(0.0, steps=1, **RUN)
    with pytest.raises(ValueError, match="delta"):
        langevin_bound(1, **RUN, delta=1.0)
    with pytest.raises(ValueError, match=r"eta must be in \(0, 1/beta\) = \(0, 0\.5\).*got 2\.0"):
        chourasia_rdp(2.0, eta=2.0, sigma=1.0, lam=1.0, beta=2.0, sensitivity=1.0, n=1, steps=1)
    with pytest.raises(ValueError, match="beta must be >= lam"):
        chourasia_rdp(2.0, eta=0.1, sigma=1.0, lam=3.0, beta=2.0, sensitivity=1.0, n=1, steps=1)
    with pytest.raises(ValueError, match="sensitivity"):
        chourasia_rdp(2.0, eta=0.1, sigma=1.0, lam=1.0, beta=2.0, sensitivity=0.0, n=1, steps=1)


def test_the_three_strongly_convex_bounds_read_one_setting():
    # One StronglyConvexRun dict serves all three bounds, and a misspelt or missing key is a
    # TypeError naming the bound and the key, as an explicit signature's would be.
    from advsim.bounds import strongly_convex_gdp_bound

    assert langevin_bound(10, **RUN).steps == 10
    assert strongly_convex_gdp_bound(10, **RUN).steps == 10
    assert noisy_sgd_rdp(2.0, **SGD) > 0
    typo = {**RUN, "lipshitz": RUN["lipschitz"]}
    for call in (
        lambda: langevin_bound(10, **typo),
        lambda: strongly_convex_gdp_bound(10, **typo),
        lambda: noisy_sgd_rdp(2.0, epochs=2, batch_size=10, **typo),
    ):
        with pytest.raises(TypeError, match=r"unexpected keyword\(s\) \['lipshitz'\]"):
            call()
    missing = {k: v for k, v in RUN.items() if k != "clip_norm"}
    with pytest.raises(TypeError, match=r"langevin_bound\(\) missing keyword\(s\) \['clip_norm'\]"):
        langevin_bound(10, **missing)
    with pytest.raises(TypeError, match=r"noisy_sgd_rdp\(\) missing"):
        noisy_sgd_rdp(2.0, epochs=2, batch_size=10, **missing)


@pytest.mark.parametrize("change,pattern", [
    (dict(alpha=1.0), r"alpha must be in \(1, inf\), got 1\.0"),
    (dict(epochs=0), "epochs"),
    (dict(num_examples=19), r"num_examples must be an integer in \[20, inf\), got 19"),
    (dict(neighbouring="add_remove"), "neighbouring must be 'replace_one'"),
    (dict(neighbouring="other"), "neighbouring must be one of"),
    (dict(clip_norm=0.5), "clip_norm must be >= lipschitz"),
    (dict(smoothness=0.5), r"strong_convexity must be in \(0, smoothness\]"),
    (dict(learning_rate=0.19), r"learning_rate must be in \(0, 2/\(smoothness \+ "
                                 r"strong_convexity\)\) = \(0, 0\.181818\)"),
])  # fmt: skip
def test_noisy_sgd_rejects_bad_input(change, pattern):
    args = dict(alpha=2.0, **SGD)
    args.update(change)
    with pytest.raises(ValueError, match=pattern):
        noisy_sgd_rdp(**args)


def test_ye_shokri_rejects_bad_input():
    good = dict(
        epochs=2,
        batch_size=10,
        num_examples=100,
        l2_reg=0.1,
        lr=1.0,
        noise_multiplier=2.0,
        smoothness=1.0,
    )
    for change, pattern in [
        (dict(l2_reg=0.0), r"l2_reg must be in \(0, inf\), got 0\.0"),
        (dict(lr=1.9), r"lr must be in \(0, 2/\(smoothness \+ l2_reg\)\)"),
        (dict(num_examples=10), "num_examples must be an integer in"),
        (dict(smoothness=0.05), "smoothness must be >= l2_reg"),
    ]:
        with pytest.raises(ValueError, match=pattern):
            ye_shokri_rdp(2.0, **{**good, **change})
