"""The order-statistics one-run audit (Xiang et al., arXiv:2509.08704) against the field's
own test vectors: the 60 rows of their `compare/RESULTS.txt` (tests/audits/data/
xiang_results.csv), both its method's column and its Steinke-Nasr-Jagielski column, and the
tail law against a simulation of the guessing game."""

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from advsim.audits import (
    expected_mistakes,
    gaussian_channel,
    one_run_epsilon,
    one_run_order_audit,
    one_run_order_epsilon,
    order_tail_probability,
    subsampled_gaussian_channel,
)
from advsim.bounds import gdp_epsilon, gdp_mu

DELTA = 1e-5
ROWS = list(
    csv.DictReader(
        line
        for line in (Path(__file__).parent / "data" / "xiang_results.csv").read_text().splitlines()
        if not line.startswith("#")
    )
)


def _row(row: dict) -> tuple:
    q = float(row["sampling_prob"]) if row["sampling_prob"] else None
    return row["family"], q, int(row["n"]), int(row["r"]), int(row["u"])


def _channel(family: str, q, mu: float):
    return gaussian_channel(mu) if q is None else subsampled_gaussian_channel(mu, q)


def test_the_table_has_its_60_rows():
    assert len(ROWS) == 60 and {r["family"] for r in ROWS} == {"gaussian", "subsampled_gaussian"}


def _sgm_mu(eps: float, q: float) -> float:
    """mu of the q-subsampled Gaussian whose H_{e^eps}(Q || P) is DELTA, from the closed
    form: (Q - e^eps P)_+ integrates to Q(x > x_e) - e^eps P(x > x_e), where the
    log-likelihood ratio log(1 - q + q e^{mu x - mu^2 / 2}) equals eps at x_e (independent
    of the module's discretised `channel_epsilon`)."""

    def excess(mu):
        x = (math.log((math.expm1(eps) + q) / q) + mu * mu / 2) / mu
        tail = (1 - q) * scipy.stats.norm.sf(x) + q * scipy.stats.norm.sf(x - mu)
        return tail - math.exp(eps) * scipy.stats.norm.sf(x) - DELTA

    return scipy.optimize.brentq(excess, 0.05, 20.0, xtol=1e-13)


# Four rows spanning the table (fast): its first, its fewest mistakes (u = 1), its largest
# true eps at r = n, and a subsampled null at r < n; every row is checked through the full
# bisection by the slow test below.
FAST = [0, 24, 31, 53]


@pytest.mark.parametrize("index", FAST)
def test_their_method_reproduces_rows_of_results_txt(index):
    """The printed `ours` P (4 decimals) of compare/RESULTS.txt, row `index` of
    data/xiang_results.csv (0: Gaussian mu=0.5 n=1000 r=100 u=26 -> 1.1926; 24: Gaussian
    mu=2 n=1000 r=100 u=1 -> 5.9018; 31: Gaussian mu=2 n=10000 r=10000 u=1587 -> 9.6881;
    53: SGM mu=2 q=0.2 n=10000 r=2500 u=870 -> 6.1668), is the rounding of eps(mu*), mu*
    the largest rejected channel, iff the channel at eps = P - 5e-5 is rejected and the one
    at P + 5e-5 is not (rejection is monotone in mu, eps increasing in mu): two
    evaluations of the tail law instead of the 46 halvings of `one_run_order_epsilon`."""
    row = ROWS[index]
    family, q, n, r, u = _row(row)
    printed = float(row["order_printed"])
    if q is None:
        below, above = gdp_mu(printed - 5e-5, DELTA), gdp_mu(printed + 5e-5, DELTA)
    else:
        below, above = _sgm_mu(printed - 5e-5, q), _sgm_mu(printed + 5e-5, q)
    assert above < float(row["true_mu"])
    assert order_tail_probability(_channel(family, q, below), u, r, n) < 0.05
    assert order_tail_probability(_channel(family, q, above), u, r, n) >= 0.05


@pytest.mark.parametrize("index", [0, 59])
def test_the_whole_search_prints_their_digits(index):
    """The full bisection and the conversion to eps (`channel_epsilon`: the closed form
    for mu-GDP, the discretised hockey stick for the subsampled pair) on rows 0 and 59:
    1.1926 and 7.0250 as printed. (The bracketing test above checks the tail law alone.)"""
    row = ROWS[index]
    family, q, n, r, u = _row(row)
    eps, _ = one_run_order_epsilon(n, r, u, delta=DELTA, family=family, sampling_prob=q)
    assert f"{eps:.4f}" == row["order_printed"]


def test_no_mistakes_is_a_valid_outcome():
    """u = 0 (every released guess right) is the strongest outcome, not an invalid one: one
    guess, right, rejects nothing at level 0.05 (P[T = 0] >= 1/2 for every channel)."""
    assert one_run_order_epsilon(1, 1, 0, delta=DELTA) == (0.0, 0.0)
    with pytest.raises(ValueError, match=r"need 0 <= u <= r <= n"):
        one_run_order_epsilon(10, 5, 6, delta=DELTA)


@pytest.mark.slow  # ~3 s
def test_no_mistakes_bounds_higher_than_one():
    """At row 24's setting (Gaussian mu=2, n=1000, r=100; RESULTS.txt prints 5.9018 at
    u = 1), u = 0 bounds higher (6.7960)."""
    eps0, _ = one_run_order_epsilon(1000, 100, 0, delta=DELTA)
    eps1, _ = one_run_order_epsilon(1000, 100, 1, delta=DELTA)
    assert f"{eps1:.4f}" == ROWS[24]["order_printed"] == "5.9018"
    assert f"{eps0:.4f}" == "6.7960"


@pytest.mark.slow  # 60 rows, 75 s on 2 unloaded cores
def test_their_method_reproduces_every_row_of_results_txt():
    wrong = []
    for row in ROWS:
        family, q, n, r, u = _row(row)
        eps, _ = one_run_order_epsilon(n, r, u, delta=DELTA, level=0.05, family=family,
                                       sampling_prob=q)  # fmt: skip
        if f"{eps:.4f}" != row["order_printed"]:
            wrong.append((row, eps))
    assert not wrong


def test_the_true_eps_and_the_mistakes_column_follow_from_the_channels():
    """Their `true eps` is the channel's eps at delta (the hockey-stick H(Q || P) of the
    subsampled pair: the order (Q, P) only), and `u` is round(E[T]) under the true
    channel (`expected_mistakes`)."""
    for index in (0, 16, 36, 59):
        row = ROWS[index]
        family, q, n, r, u = _row(row)
        mu = float(row["true_mu"])
        if q is None:
            assert f"{gdp_epsilon(DELTA, mu):.4f}" == row["true_eps"]
        assert round(expected_mistakes(_channel(family, q, mu), n, r)) == u, row


def _snj_as_printed(m, r, v, eps, delta):
    """The p-value of the Steinke-Nasr-Jagielski port in their repository
    (`compare/steinke.py`), written out: its delta term takes the window
    P[v - i < B <= v], where SNJ's Algorithm 3 (and `advsim.audits.one_run_p_value`, and
    jax_privacy) take P[v - i <= B < v]."""
    q = 1 / (1 + math.exp(-eps))
    beta = scipy.stats.binom.sf(v - 1, r, q)
    if v == 0:
        return min(beta, 1.0)
    i = np.arange(1, v + 1)
    alpha = np.max((scipy.stats.binom.cdf(v, r, q) - scipy.stats.binom.cdf(v - i, r, q)) / i)
    return min(beta + alpha * delta * 2 * m, 1.0)


def _largest_rejected(p_value, level=0.05) -> float:
    lo, hi = 0.0, 1.0
    while p_value(hi) < level:
        lo, hi = hi, hi + 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if p_value(mid) < level else (lo, mid)
    return lo


def _snj_columns(rows) -> list[tuple[str, float, float]]:
    """(printed, their port's value, advsim's `one_run_epsilon`) per row."""
    out = []
    for row in rows:
        _, _, n, r, u = _row(row)
        theirs = _largest_rejected(lambda e, n=n, r=r, u=u: _snj_as_printed(n, r, r - u, e, DELTA))
        ours = one_run_epsilon(n, r, r - u, delta=DELTA, level=0.05)
        out.append((row["snj_printed"], theirs, ours))
    return out


def test_the_snj_column_of_some_rows():
    """Rows 0 and 24: the printed SNJ value is their port's; advsim's `one_run_epsilon`
    (SNJ's Algorithm 3, equal to jax_privacy's) differs through the window of the delta
    term (`_snj_as_printed`): 0.6517 against 0.6519, 3.0028 against 3.0052."""
    (p0, t0, o0), (p1, t1, o1) = _snj_columns([ROWS[0], ROWS[24]])
    assert (f"{t0:.4f}", f"{t1:.4f}") == (p0, p1) == ("0.6519", "3.0052")
    assert (f"{o0:.4f}", f"{o1:.4f}") == ("0.6517", "3.0028")


@pytest.mark.slow  # 60 rows, ~10 s
def test_the_snj_column():
    """Their SNJ column is reproduced by their port's p-value to the printed digits in all
    60 rows. advsim's `one_run_epsilon` takes SNJ's window, one count lower: it prints the
    same 4 digits in 36 of the 60 rows and is at most 0.0097 below the printed value
    (Gaussian mu=2, n=100000, r=10000, u=51: 4.8577 against 4.8674), never above it
    beyond the printed rounding."""
    columns = _snj_columns(ROWS)
    assert all(f"{theirs:.4f}" == printed for printed, theirs, _ in columns)
    same = sum(f"{ours:.4f}" == printed for printed, _, ours in columns)
    below = [float(printed) - ours for printed, _, ours in columns]
    assert same == 36 and max(below) == pytest.approx(0.0097, abs=1e-4) and min(below) > -5e-5


def test_the_tail_law_matches_a_simulation_of_the_guessing_game():
    """Theorem 2 read directly: n fair bits through N(0, 1) / N(mu, 1), the decoder guesses
    by the sign of the log-likelihood ratio on the r outputs of largest |LLR|; the share of
    20000 games with at most u mistakes against `order_tail_probability`."""
    n, r, mu, games = 200, 40, 1.0, 20_000
    rng = np.random.default_rng(0)
    bits = rng.random((games, n)) < 0.5
    x = rng.normal(0.0, 1.0, (games, n)) + mu * bits
    llr = mu * x - mu * mu / 2
    top = np.argsort(-np.abs(llr), axis=1)[:, :r]
    guess = np.take_along_axis(llr, top, axis=1) > 0
    mistakes = np.sum(guess != np.take_along_axis(bits, top, axis=1), axis=1)
    profile = gaussian_channel(mu)
    for u in (2, 4, 6):
        p = order_tail_probability(profile, u, r, n)
        share = np.mean(mistakes <= u)
        assert abs(share - p) < 4 * math.sqrt(p * (1 - p) / games) + 1e-3, (u, p, share)
    assert np.mean(mistakes) == pytest.approx(expected_mistakes(profile, n, r), rel=0.02)
    # r = n: no cut, T ~ Binomial(n, E_M[gamma])
    e = profile.optimal_error
    assert order_tail_probability(profile, 70, n, n) == scipy.stats.binom.cdf(70, n, e)


def test_the_audit_counts_the_mistakes_of_its_most_confident_guesses():
    rng = np.random.default_rng(1)
    included = rng.random(10_000) < 0.5
    scores = rng.normal(0.0, 1.0, 10_000) + 2.0 * included - 1.0  # mu = 2, centred
    result = one_run_order_audit(scores, included, delta=DELTA, r=1000)
    top = np.argsort(-np.abs(scores))[:1000]
    assert result.u == int(np.sum((scores[top] > 0) != included[top]))
    # Its numbers are those of its (n, r, u) at level 1 - confidence, by the function
    # checked against RESULTS.txt above.
    expected = one_run_order_epsilon(10_000, 1000, result.u, delta=DELTA, level=0.05)
    assert (result.eps_lower, result.mu_lower) == pytest.approx(expected, rel=1e-12)
    truth = gdp_epsilon(DELTA, 2.0)
    assert 0.8 * truth < result.eps_lower < truth and result.mu_lower < 2.0
    with pytest.raises(ValueError, match=r"r must be in \[1, n\]"):
        one_run_order_audit(scores, included, delta=DELTA, r=20_000)
    with pytest.raises(ValueError, match="family must be"):
        one_run_order_epsilon(100, 10, 1, delta=DELTA, family="laplace")
