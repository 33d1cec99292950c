"""Tests for the shifted-interpolation hidden-state bound (_shifted_interpolation.py).

Reference values come from (i) the closed form the authors of arXiv:2403.00278 evaluate
as "Our Bound" for NoisyGD, constrained convex case (plot_table_ngd_fdp.py, function
`ngd_fdp_proj`, github.com/jinhobok/shifted_interpolation_dp@31fb075, written with D = 1
and mu = L/n):
    mu0 = sqrt(3 * mu / eta + mu**2 * ceil(1 / (mu * eta))) / sigma,
    bound(t) = min(mu0, mu / sigma * sqrt(t)),
    t* = ceil((3 * mu / eta + mu**2 * ceil(1 / (mu * eta))) / mu**2),
evaluated here in mpmath after mapping a DP-SGD run to the paper's NoisyGD by hand
(eta = lr n / D after rescaling the diameter to 1, sigma_paper = sigma C / n,
mu = s1 / n); (ii) the shifted-interpolation derivation itself: starting k steps before
the end from runs at most D apart and shifting in k equal steps gives
mu^2 = (D / sqrt(k) + s sqrt(k))^2 / b^2 for every k, which the closed form must not beat;
(iii) limits: one step is the Gaussian mechanism (mu = sensitivity / noise), the bound
never exceeds composition, stops growing at t* and decreases in sigma; (iv) Corollary 2.13
of arXiv:1905.02383 in mpmath for the epsilon.
"""

import math

import mpmath as mp
import pytest

from advsim.bounds import (
    ShiftedInterpolationBound,
    gdp_epsilon,
    shifted_interpolation_bound,
    shifted_interpolation_epsilon,
)
from advsim.exact import last_iterate_epsilons
from advsim.mechanisms import ProjectedLinearCanary

# A projected logistic regression shaped like breast_cancer's (L = largest feature norm
# with the bias, M = L^2 / 4, lr at its largest allowed value 2 / (n M)).
L_BC = 19.536
N_BC = 428
RUN = dict(
    noise_multiplier=8.0, clip_norm=L_BC, lipschitz=L_BC, smoothness=L_BC**2 / 4,
    learning_rate=2.0 / (N_BC * L_BC**2 / 4), num_examples=N_BC, diameter=0.2,
)  # fmt: skip
#: The authors' own representative point (sigma = 8, eta = 0.1, L/n = 0.5, D = 1): one
#: example of norm 1 in n = 2, lr = eta / n, noise sigma C / n = 8.
AUTHORS_RUN = dict(noise_multiplier=16.0, clip_norm=1.0, lipschitz=1.0, smoothness=1.0,
                   learning_rate=0.05, num_examples=2, diameter=1.0)  # fmt: skip


def authors_formula(t, *, noise_multiplier, clip_norm, lipschitz, learning_rate,
                    num_examples, diameter, neighbouring="add_remove", **_):  # fmt: skip
    """(mu_t, t*) from the authors' ngd_fdp_proj (D = 1, mu = L/n), in mpmath at 50 digits,
    after mapping the DP-SGD run onto the paper's NoisyGD by hand."""
    with mp.workdps(50):
        n = mp.mpf(num_examples)
        s1 = mp.mpf(lipschitz) * (1 if neighbouring == "add_remove" else 2)
        mu = s1 / n  # the paper's L/n: the averaged gradient's sensitivity
        eta = mp.mpf(learning_rate) * n / mp.mpf(diameter)  # eta = lr n, then D -> 1
        sigma = mp.mpf(noise_multiplier) * mp.mpf(clip_norm) / n  # sigma C / n
        inner = 3 * mu / eta + mu**2 * mp.ceil(1 / (mu * eta))
        mu0 = mp.sqrt(inner) / sigma
        t_star = int(mp.ceil(inner / mu**2))
        return float(min(mu0, mu / sigma * mp.sqrt(t))), t_star


@pytest.mark.parametrize("steps", [1, 7, 40, 100, 1000, 10**6])
@pytest.mark.parametrize(
    "run",
    [
        RUN,
        dict(RUN, diameter=1.0, noise_multiplier=3.0),
        dict(RUN, learning_rate=RUN["learning_rate"] / 3, clip_norm=2 * L_BC),
        dict(RUN, neighbouring="replace_one", diameter=0.05),
        AUTHORS_RUN,
    ],
)
def test_matches_the_authors_formula(steps, run):
    b = shifted_interpolation_bound(steps, **run)
    mu, t_star = authors_formula(steps, **run)
    assert b.mu == pytest.approx(mu, rel=1e-12)
    assert b.plateau_steps == t_star


def test_authors_table_entry():
    # The authors' Table (t*, mu*) at sigma = 8, eta = 0.1, L/n = 0.5 (their ngd_fdp_proj
    # representative values): mu* = sqrt(3 * 0.5 / 0.1 + 0.25 * 20) / 8 = sqrt(20) / 8,
    # t* = 20 / 0.25 = 80; the figure's legend there reads "Our Bound, t >= 80".
    b = shifted_interpolation_bound(10_000, **AUTHORS_RUN)
    assert b.plateau_steps == 80
    assert b.walk_steps == 20
    assert b.mu == pytest.approx(math.sqrt(20.0) / 8.0, rel=1e-14)


@pytest.mark.parametrize("steps", [1, 3, 50, 400, 5000])
@pytest.mark.parametrize("diameter", [0.01, 0.2, 3.0])
def test_never_beats_the_shifted_interpolation_derivation(steps, diameter):
    # (ii): the derivation's best k in 1..T (k = T from a common start: composition)
    # lower-bounds any closed form read off it, and the closed form is exactly the
    # derivation at k = ceil(D/s) once D^2/k is bounded by D s.
    run = dict(RUN, diameter=diameter)
    b = shifted_interpolation_bound(steps, **run)
    s = run["learning_rate"] * run["lipschitz"]
    noise = run["learning_rate"] * run["noise_multiplier"] * run["clip_norm"]
    with mp.workdps(40):
        best = mp.sqrt(steps) * s / noise
        for k in range(1, steps + 1):
            best = min(best, (diameter / mp.sqrt(k) + s * mp.sqrt(k)) / noise)
    assert b.mu >= float(best) * (1 - 1e-12)
    # Nor is it loose by more than one step's s/b: the closed form has
    # mu^2 <= (3 D s + s^2 (D/s + 1)) / b^2 <= (2 sqrt(D s) + s)^2 / b^2, while every
    # k gives at least 2 sqrt(D s) / b (AM-GM) unless composition is smaller still.
    assert b.mu <= float(best) + s / noise * (1 + 1e-12)


@pytest.mark.parametrize("neighbouring, factor", [("add_remove", 1), ("replace_one", 2)])
def test_one_step_is_the_gaussian_mechanism(neighbouring, factor):
    # One step, every iterate = the last: the Gaussian mechanism with sensitivity
    # lr * s1 (s1 = L or 2L) and noise lr * sigma * C, exactly mu = s1 / (sigma C).
    run = dict(RUN, clip_norm=1.5 * L_BC, neighbouring=neighbouring)
    b = shifted_interpolation_bound(1, **run)
    exact = factor * L_BC / (run["noise_multiplier"] * run["clip_norm"])
    assert b.mu == pytest.approx(exact, rel=1e-14)
    assert b.mu >= exact * (1 - 1e-15)  # a bound may never beat the exact value


def test_plateaus_below_composition():
    mus = [shifted_interpolation_bound(t, **RUN).mu for t in range(1, 2001)]
    comp = [shifted_interpolation_bound(t, **RUN).mu_composition for t in range(1, 2001)]
    t_star = shifted_interpolation_bound(1, **RUN).plateau_steps
    assert 1 < t_star < 2000  # the test's run does plateau in range
    assert all(a <= b for a, b in zip(mus, mus[1:], strict=False))  # non-decreasing
    assert all(m <= c * (1 + 1e-15) for m, c in zip(mus, comp, strict=True))
    assert len(set(mus[t_star - 1 :])) == 1  # flat from t* on
    assert mus[t_star - 2] < mus[t_star - 1]  # and still growing just before
    # by T = 2000 the bound is composition's value at t*, not at T: sqrt(t* / T) of it
    assert mus[-1] <= comp[-1] * math.sqrt(t_star / 2000) * (1 + 1e-15)
    assert mus[-1] < 0.7 * comp[-1]


def test_decreases_in_sigma():
    sigmas = [0.5, 1.0, 2.0, 4.0, 16.0]
    for steps in (1, 100, 10_000):
        mus = [shifted_interpolation_bound(steps, **dict(RUN, noise_multiplier=s)).mu
               for s in sigmas]  # fmt: skip
        assert all(a > b for a, b in zip(mus, mus[1:], strict=False))


def test_invariant_under_rescaling_the_parameter_space():
    # x -> c x (loss f(x / c) c: same gradients, smoothness M / c, learning rate c lr,
    # diameter c D, noise c lr sigma C): the same run, the same privacy.
    base = shifted_interpolation_bound(300, **RUN)
    c = 3.0
    scaled = dict(RUN, learning_rate=c * RUN["learning_rate"],
                  smoothness=RUN["smoothness"] / c, diameter=c * RUN["diameter"])  # fmt: skip
    assert shifted_interpolation_bound(300, **scaled).mu == pytest.approx(base.mu, rel=1e-12)


def test_epsilon_is_the_gdp_profile():
    b = shifted_interpolation_bound(5000, **RUN, delta=1e-5)
    assert isinstance(b, ShiftedInterpolationBound)
    assert b.epsilon == gdp_epsilon(1e-5, b.mu)
    assert shifted_interpolation_epsilon(1e-5, 5000, **RUN) == b.epsilon
    # Corollary 2.13 of arXiv:1905.02383 in mpmath: delta(eps) at the returned eps is 1e-5.
    with mp.workdps(40):
        mu, eps = mp.mpf(b.mu), mp.mpf(b.epsilon)
        delta = mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)
    assert float(delta) == pytest.approx(1e-5, rel=1e-8)
    assert b.assumptions and "convex" in b.assumptions[0]
    assert "2403.00278" in b.reference


@pytest.mark.parametrize(
    "change, name",
    [
        (dict(learning_rate=2.0 / (N_BC * L_BC**2 / 4) * 1.01), "learning_rate"),
        (dict(clip_norm=0.99 * L_BC), "clip_norm"),
        (dict(diameter=0.0), "diameter"),
        (dict(diameter=-1.0), "diameter"),
        (dict(noise_multiplier=0.0), "noise_multiplier"),
        (dict(lipschitz=0.0), "lipschitz"),
        (dict(num_examples=0), "num_examples"),
        (dict(neighbouring="swap"), "neighbouring"),
    ],
)
def test_refuses_runs_outside_the_assumptions(change, name):
    with pytest.raises(ValueError, match=name):
        shifted_interpolation_bound(10, **dict(RUN, **change))


def test_accepts_the_boundary_learning_rate_and_refuses_a_bad_delta():
    # lr n M = 2 exactly is the paper's eta = 2/M: allowed.
    shifted_interpolation_bound(10, **dict(RUN, learning_rate=0.5, num_examples=4,
                                           smoothness=1.0))  # fmt: skip
    with pytest.raises(ValueError, match="delta"):
        shifted_interpolation_bound(10, **RUN, delta=1.5)
    with pytest.raises(ValueError, match="steps"):
        shifted_interpolation_bound(0, **RUN)


# --- (v) the exact hidden-state epsilon of one instance that meets every assumption -----
#
# A 1-D projected linear canary: the canary's loss -w (convex, 0-smooth, 1-Lipschitz,
# C = L = 1), no other data, learning rate 1, K = [-R, R] (D = 2R), w_0 = 0:
#   w_t = clamp(w_{t-1} + b + sigma Z_t, -R, R),  b = 1 canary in, 0 out.
# This is `advsim.mechanisms.ProjectedLinearCanary`; its last iterate's law is a Markov
# chain, propagated by the exact-law engine (`advsim.exact`, checked against a dense
# transition matrix in tests/mechanisms/test_projected.py), and its eps(delta) at every
# T read off the finest grid (`every_step`), to its refinement estimate. The bound
# must hold on this instance at every T; at the plateau it is 2.5-4.4x the exact
# eps here, e.g. R = 0.5, sigma = 1: exact 2.27 against 10.00 (D/s = 1: mu* = 2). A plateau
# half as large (mu*^2 = (D/s) (s/b)^2 instead of (3 D/s + k) (s/b)^2) fails the
# R = 1, sigma = 0.5 case (checked by editing the library).


@pytest.mark.slow
def test_never_below_the_exact_epsilon_of_a_projected_linear_canary():
    cases = ((0.5, 1.0), (2.0, 1.0), (1.0, 0.5), (5.0, 2.0))  # (radius, sigma)
    steps = (1, 2, 5, 20, 200)
    mechs = [ProjectedLinearCanary(max(steps), s, radius=r) for r, s in cases]
    laws = last_iterate_epsilons(mechs, 1e-5, every_step=True)  # one batched call
    for (radius, sigma), law in zip(cases, laws, strict=True):
        _check_bound_above_exact(radius, sigma, steps, law)


def _check_bound_above_exact(radius, sigma, steps, law):
    exact = {t: law.epsilon_per_step[t - 1] + law.error for t in steps}
    run = dict(
        noise_multiplier=sigma, clip_norm=1.0, lipschitz=1.0, smoothness=0.0,
        learning_rate=1.0, num_examples=1, diameter=2 * radius,
    )  # fmt: skip
    for t in steps:
        bound = shifted_interpolation_epsilon(1e-5, t, **run)
        assert exact[t] <= bound, (radius, sigma, t, exact[t], bound)
    # The instance is not trivially private: one step already leaks most of a Gaussian
    # mechanism's eps, and the hidden state plateaus, as the bound says it may.
    assert exact[1] > 0.3 * gdp_epsilon(1e-5, 1.0 / sigma)
    assert exact[200] - exact[20] < 0.1 * exact[200]
