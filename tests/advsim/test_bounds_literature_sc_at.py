"""Tests for the strongly convex hidden-state GDP bound (_strongly_convex.py).

Bok, Su & Altschuler, "Shifted interpolation for differential privacy" (ICML 2024,
arXiv:2403.00278), NoisyGD in the unconstrained strongly convex case.

Reference values: (i) numbers the authors' code computes for the paper's table and
Figure 1. `ngd_fdp_sc` in plot_table_ngd_fdp.py (github.com/jinhobok/
shifted_interpolation_dp@31fb075, unchanged at a771c16; the README says the file draws
Tables 7-8 of the latest arXiv version) fills the table labelled `tab:ngd-fdp-sc` ("GDP
parameters over different values of t and c, with L/(n sigma) = 0.1") with
    np.sqrt((1-c**t) / (1+c**t) * (1 + c) / (1 - c)) * mu,   mu = 0.1,
for t in [10, 100, 1000] and c in [1 - 0.08, 1 - 0.04, 1 - 0.02, 1 - 0.01, 1 - 0.005],
printed at 3 decimals, with a last "GDP Composition" column sqrt(t) * mu. plot_intro.py
draws Figure 1 with the same expression at c = 0.95, mu = 1/10, t in [10, 20, 40, 80, 160].
These lines were evaluated once with numpy outside this repository (the authors' code is
not imported) and their output is transcribed below. (ii) Tightness: for a quadratic
regularizer and a canary of constant gradient the last iterate is Gaussian in both worlds;
its exact GDP parameter, from an independent mean/variance recursion, must never exceed
the bound and equals it when 0 < lr * a <= 1. (iii) The mapping from advsim's DP-SGD
parameters to the paper's NoisyGD, and bad inputs.
"""

import dataclasses
import math

import pytest

from advsim.bounds import gdp_epsilon
from advsim.bounds._strongly_convex import (
    StronglyConvexGDPBound,
    contraction_gdp_mu,
    noisy_gd_strongly_convex_mu,
    strongly_convex_gdp_bound,
    strongly_convex_gdp_epsilon,
)

# --- (i) the authors' numbers ---------------------------------------------------------

C_SEQ = [1 - 0.08, 1 - 0.04, 1 - 0.02, 1 - 0.01, 1 - 0.005]
# ngd_fdp_sc's table (tab:ngd-fdp-sc), mu = L/(n sigma) = 0.1, printed as
#   t     0.92   0.96   0.98   0.99   0.995  GDP Composition
#   10    0.308  0.314  0.316  0.316  0.316  0.316
#   100   0.490  0.688  0.871  0.961  0.990  1.000
#   1000  0.490  0.700  0.995  1.411  1.984  3.162
# and the unrounded floats behind it (numpy repr):
TABLE = {
    10: [0.3076318969597429, 0.3140824077020787, 0.31569708221760584,
         0.316096111326877, 0.31619499777150106],
    100: [0.48978077316316737, 0.6882887295464671, 0.8707237339804994,
          0.9610137446461975, 0.9897358773049292],
    1000: [0.48989794855663577, 0.6999999999999997, 0.9949874354320882,
           1.4106126987421936, 1.9842510708572538],
}  # fmt: skip
TABLE_PRINTED = {
    10: ["0.308", "0.314", "0.316", "0.316", "0.316"],
    100: ["0.490", "0.688", "0.871", "0.961", "0.990"],
    1000: ["0.490", "0.700", "0.995", "1.411", "1.984"],
}
COMPOSITION_PRINTED = {10: "0.316", 100: "1.000", 1000: "3.162"}
# plot_intro.py, Figure 1, "Our f-DP bound (optimal)": c = 0.95, mu = 1/10.
FIGURE_1 = {
    10: 0.3128660142338566, 20: 0.42914872632387474, 40: 0.5487946252466747,
    80: 0.614269730921392, 160: 0.6243294860028353,
}  # fmt: skip


@pytest.mark.parametrize("t", sorted(TABLE))
def test_authors_table_bare_formula(t):
    for c, value, printed in zip(C_SEQ, TABLE[t], TABLE_PRINTED[t], strict=True):
        mu = contraction_gdp_mu(t, c, 0.1)
        assert mu == pytest.approx(value, rel=1e-12)
        assert f"{mu:.3f}" == printed


@pytest.mark.parametrize("t", sorted(TABLE))
def test_authors_table_as_a_dp_sgd_run(t):
    """The same cells as advsim runs: sigma = 10, C = L = 1 (mu_1 = 0.1), lr = 1,
    M = 1 (|1 - lr M| = 0) and m = 1 - c, so c = max(|1 - m|, 0) = 1 - m."""
    for c, value, printed in zip(C_SEQ, TABLE[t], TABLE_PRINTED[t], strict=True):
        b = strongly_convex_gdp_bound(
            t, noise_multiplier=10.0, clip_norm=1.0, lipschitz=1.0,
            strong_convexity=round(1 - c, 3), smoothness=1.0, learning_rate=1.0,
            num_examples=50,
        )  # fmt: skip
        assert b.contraction == pytest.approx(c, rel=1e-14)
        assert b.mu == pytest.approx(value, rel=1e-12)
        assert f"{b.mu:.3f}" == printed
        assert f"{b.mu_composition:.3f}" == COMPOSITION_PRINTED[t]


@pytest.mark.parametrize("t", sorted(FIGURE_1))
def test_authors_figure_1(t):
    # eta m = 0.05 and eta M = 0.5 give c = 0.95; L/(n sigma) = 0.1.
    mu = noisy_gd_strongly_convex_mu(
        t, step_size=0.5, strong_convexity=0.1, smoothness=1.0, sensitivity=0.1, noise=1.0
    )
    assert mu == pytest.approx(FIGURE_1[t], rel=1e-12)


# --- (ii) tightness on the exactly solvable case ---------------------------------------


def exact_quadratic_mu(steps, lr, a, sigma, clip, shift_factor=1.0):
    """Exact GDP parameter of the last iterate of
    x_t = x_{t-1} - lr (a x_{t-1} - shift_factor * clip) + N(0, (lr sigma clip)^2)
    against the same run without the canary's constant gradient, from x_0 = 0, by an
    independent mean/variance recursion (not the closed form)."""
    mean = var = 0.0
    for _ in range(steps):
        mean = (1.0 - lr * a) * mean + lr * shift_factor * clip
        var = (1.0 - lr * a) ** 2 * var + (lr * sigma * clip) ** 2
    return mean / math.sqrt(var)


@pytest.mark.parametrize("steps", [1, 2, 5, 50, 1000])
@pytest.mark.parametrize("lr_a", [0.01, 0.3, 1.0, 1.5, 1.99])
@pytest.mark.parametrize("sigma", [0.5, 4.0])
def test_bound_is_sound_and_tight_for_a_quadratic(steps, lr_a, sigma):
    # Canary loss -C x (linear, gradient norm C = L: clipping never acts), regularizer
    # a x^2 / 2: the summed objective is a-strongly convex and a-smooth with and without
    # the canary, so m = M = a and c = |1 - lr a|.
    lr, clip = 0.1, 1.0
    a = lr_a / lr
    b = strongly_convex_gdp_bound(
        steps, noise_multiplier=sigma, clip_norm=clip, lipschitz=clip, strong_convexity=a,
        smoothness=a, learning_rate=lr, num_examples=7,
    )  # fmt: skip
    exact = exact_quadratic_mu(steps, lr, a, sigma, clip)
    assert b.mu >= exact * (1 - 1e-12)
    if lr_a <= 1.0 or steps == 1:  # c = 1 - lr a >= 0: the bound is the exact value
        assert b.mu == pytest.approx(exact, rel=1e-12)


def test_replace_one_doubles_the_shift_and_stays_tight():
    # Replacing the canary's gradient -C by +C moves each step by 2 lr C: s_1 = 2L.
    lr, a, sigma, clip, steps = 0.05, 4.0, 3.0, 2.0, 40
    b = strongly_convex_gdp_bound(
        steps, noise_multiplier=sigma, clip_norm=clip, lipschitz=clip, strong_convexity=a,
        smoothness=a, learning_rate=lr, num_examples=7, neighbouring="replace_one",
    )  # fmt: skip
    assert b.mu == pytest.approx(exact_quadratic_mu(steps, lr, a, sigma, clip, 2.0), rel=1e-12)


# --- (iii) mapping, limits, epsilon ----------------------------------------------------

RUN = dict(
    noise_multiplier=1.3, clip_norm=2.0, lipschitz=1.5, strong_convexity=30.0,
    smoothness=500.0, learning_rate=1e-3, num_examples=1000,
)  # fmt: skip


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace_one"])
@pytest.mark.parametrize("steps", [1, 10, 300, 10**5])
@pytest.mark.parametrize(
    "run", [RUN, dict(RUN, learning_rate=3e-3), dict(RUN, strong_convexity=500.0)]
)
def test_advsim_parameterisation_matches_the_paper(run, steps, neighbouring):
    """eta = lr n, sigma_paper = sigma C / n, L_bar = s1 / n, m, M of F / n."""
    b = strongly_convex_gdp_bound(steps, neighbouring=neighbouring, **run)
    n = run["num_examples"]
    s1 = run["lipschitz"] * (1 if neighbouring == "add_remove" else 2)
    paper = noisy_gd_strongly_convex_mu(
        steps, step_size=run["learning_rate"] * n,
        strong_convexity=run["strong_convexity"] / n, smoothness=run["smoothness"] / n,
        sensitivity=s1 / n, noise=run["noise_multiplier"] * run["clip_norm"] / n,
    )  # fmt: skip
    assert b.mu == pytest.approx(paper, rel=1e-12)
    assert b.paper_step_size == pytest.approx(run["learning_rate"] * n)
    assert b.paper_noise == pytest.approx(run["noise_multiplier"] * run["clip_norm"] / n)
    assert b.paper_sensitivity == pytest.approx(s1 / n)
    assert b.paper_strong_convexity == pytest.approx(run["strong_convexity"] / n)
    assert b.paper_smoothness == pytest.approx(run["smoothness"] / n)
    eta_m = b.paper_step_size * b.paper_strong_convexity
    eta_big_m = b.paper_step_size * b.paper_smoothness
    assert b.contraction == pytest.approx(max(abs(1 - eta_m), abs(1 - eta_big_m)), rel=1e-12)


def test_limits_and_monotonicity():
    mus = [strongly_convex_gdp_bound(t, **RUN) for t in (1, 2, 10, 100, 1000, 10**6)]
    first = mus[0]
    assert first.mu == pytest.approx(first.mu_one_step, rel=1e-14)  # the Gaussian mechanism
    assert first.mu_one_step == pytest.approx(1.5 / (1.3 * 2.0))
    for prev, cur in zip(mus, mus[1:], strict=False):
        assert prev.mu < cur.mu <= cur.mu_limit
        assert cur.mu <= cur.mu_composition
    assert mus[-1].mu == pytest.approx(mus[-1].mu_limit, rel=1e-12)
    # c = 1 - lr m = 0.97: limit mu_1 sqrt(1.97 / 0.03).
    assert mus[-1].contraction == pytest.approx(0.97, rel=1e-12)
    assert mus[-1].mu_limit == pytest.approx(first.mu_one_step * math.sqrt(1.97 / 0.03))


def test_no_cancellation_near_c_equal_one():
    # 1 - c = 1e-12: for T << 10^12 the bound is composition, sqrt(T) mu_1.
    mu = contraction_gdp_mu(1000, 1 - 1e-12, 0.5)
    assert mu == pytest.approx(math.sqrt(1000) * 0.5, rel=1e-8)
    b = strongly_convex_gdp_bound(
        10**15, noise_multiplier=1.0, clip_norm=1.0, lipschitz=1.0, strong_convexity=1e-12,
        smoothness=1.0, learning_rate=1.0, num_examples=3,
    )  # fmt: skip
    assert math.isfinite(b.mu) and b.mu == pytest.approx(b.mu_limit, rel=1e-6)


def test_contraction_zero_is_one_step():
    assert contraction_gdp_mu(50, 0.0, 0.7) == 0.7


def test_epsilon_and_result():
    b = strongly_convex_gdp_bound(200, delta=1e-5, **RUN)
    assert isinstance(b, StronglyConvexGDPBound)
    assert b.epsilon == pytest.approx(gdp_epsilon(1e-5, b.mu), rel=1e-12)
    assert strongly_convex_gdp_epsilon(1e-5, 200, **RUN) == b.epsilon
    assert strongly_convex_gdp_bound(200, **RUN).epsilon is None
    assert "2403.00278" in b.reference and "ngd_fdp_sc" in b.reference
    assert any("full batch" in a for a in b.assumptions)
    assert any("strongly convex" in a for a in b.assumptions)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.mu = 0.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(strong_convexity=0.0), r"strong_convexity must be in \(0, inf\), got 0.0"),
        (dict(strong_convexity=600.0), r"strong_convexity must be in \(0, smoothness\]"),
        (dict(smoothness=-1.0), r"smoothness must be in \(0, inf\)"),
        (dict(learning_rate=2 / 500), r"learning_rate must be in \(0, 2/smoothness\)"),
        (dict(learning_rate=0.0), r"learning_rate must be in \(0, inf\)"),
        (dict(clip_norm=1.0), r"clip_norm must be >= lipschitz = 1.5"),
        (dict(noise_multiplier=-1.0), r"noise_multiplier must be in \(0, inf\)"),
        (dict(num_examples=0), r"num_examples must be an integer in \[1, inf\)"),
        (dict(neighbouring="swap"), r"neighbouring must be one of"),
        (dict(delta=1.0), r"delta must be in \(0, 1\), got 1.0"),
    ],
)
def test_bad_inputs(change, match):
    with pytest.raises(ValueError, match=match):
        strongly_convex_gdp_bound(10, **{**RUN, **change})


def test_bad_inputs_bare_and_paper():
    with pytest.raises(ValueError, match=r"steps must be an integer in \[1, inf\), got 0"):
        strongly_convex_gdp_bound(0, **RUN)
    with pytest.raises(ValueError, match=r"contraction must be in \[0, 1\), got 1.0"):
        contraction_gdp_mu(10, 1.0, 0.1)
    with pytest.raises(ValueError, match=r"contraction must be in \[0, 1\), got -0.1"):
        contraction_gdp_mu(10, -0.1, 0.1)
    with pytest.raises(ValueError, match=r"one_step_mu must be in \(0, inf\)"):
        contraction_gdp_mu(10, 0.5, 0.0)
    with pytest.raises(ValueError, match=r"step_size must be in \(0, 2 / smoothness\)"):
        noisy_gd_strongly_convex_mu(
            10, step_size=2.0, strong_convexity=0.5, smoothness=1.0, sensitivity=1.0,
            noise=1.0,
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"sensitivity must be in \(0, inf\)"):
        noisy_gd_strongly_convex_mu(
            10, step_size=1.0, strong_convexity=0.5, smoothness=1.0, sensitivity=0.0,
            noise=1.0,
        )  # fmt: skip
