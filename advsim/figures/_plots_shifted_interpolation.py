r"""A rigorous hidden-state bound on projected logistic regression.

Projected full-batch DP-GD of logistic regression on breast_cancer (the split and scaling
of `advsim.mechanisms.load_dataset`; the bias is a constant feature), the model projected
onto the ball of radius $R$ after every step:

$$w_{t+1} = \Pi_{B(0, R)}\Bigl(w_t - \lambda\Bigl(\sum_i \mathrm{clip}_C(\nabla\ell_i(w_t))
  + \mathcal N(0, \sigma^2C^2I)\Bigr)\Bigr), \qquad w_0 = 0 .$$

The logistic loss of an example $(x, y)$ is convex with gradient $(p - y)x$, so it is
$\|x\|$-Lipschitz and $\|x\|^2/4$-smooth: $L = \max_i \|x_i\|$ over the training set (a
canary must be no larger), $M = L^2/4$, $C = L$ (clipping never acts), $n$ the training
examples plus the canary, and $\lambda$ a fraction of the largest float with
$\lambda n M \le 2$ (every gradient step non-expansive). The run meets every assumption of
`advsim.bounds.shifted_interpolation_bound` with $D = 2R$.

For $T = 1..T_{\max}$ the figure draws $\varepsilon(T)$ at $\delta$ of composition (every
iterate released; full batch, $\sqrt T/\sigma$-GDP exactly, `full_batch_epsilon`), the
last-iterate heuristic (`heuristic_epsilon_curve`, equal to composition at $q = 1$) and
the shifted-interpolation bound, which stops growing after $t^*$ steps. The engine has no
projection step, so the test accuracy of the projected runs is measured by a direct numpy
implementation of the update above (`projected_dpgd_accuracy`), private and non-private
(no noise, same ball), to show the projected models still learn.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from advsim._plot_style import fit_title, styled_pyplot
from advsim.bounds import (
    full_batch_epsilon,
    heuristic_epsilon_curve,
    shifted_interpolation_bound,
)
from advsim.mechanisms import load_dataset
from advsim.plotting import BOUND_STYLES, save_figure

__all__ = [
    "compute_shifted_interpolation",
    "logistic_constants",
    "plot_shifted_interpolation",
    "projected_dpgd_accuracy",
]


def _with_bias(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return np.hstack([x, np.ones((x.shape[0], 1))])


def logistic_constants(dataset: str = "breast_cancer") -> dict:
    """`lipschitz` (largest feature norm, bias included), `smoothness` ($L^2/4$),
    `num_examples` (training examples + the canary) and the largest float learning rate
    with learning_rate * num_examples * smoothness <= 2, for binary logistic regression on
    `load_dataset(dataset)`."""
    data = load_dataset(dataset)
    if data.num_classes != 2:
        raise ValueError(f"dataset must have two classes (logistic regression), got {dataset!r}")
    lip = float(np.linalg.norm(_with_bias(data.x_train), axis=1).max())
    smooth = lip * lip / 4.0
    n = data.x_train.shape[0] + 1
    lr = 2.0 / (n * smooth)
    while Fraction(lr) * n * Fraction(smooth) > 2:  # the float quotient may round up
        lr = math.nextafter(lr, 0.0)
    return dict(lipschitz=lip, smoothness=smooth, num_examples=n, max_learning_rate=lr)


def projected_dpgd_accuracy(
    dataset: str,
    *,
    radius: float,
    learning_rate: float,
    noise_multiplier: float,
    clip_norm: float,
    steps: int,
    runs: int,
    seed: int,
    private: bool = True,
) -> np.ndarray:
    """Test accuracy of `runs` projected full-batch DP-GD logistic regressions (the update
    of the module docstring, float64, `numpy.random.default_rng(seed)`; without noise
    when not `private`)."""
    data = load_dataset(dataset)
    x, y = _with_bias(data.x_train), np.asarray(data.y_train, np.float64)
    x_test, y_test = _with_bias(data.x_test), np.asarray(data.y_test)
    rng = np.random.default_rng(seed)
    w = np.zeros((runs, x.shape[1]))
    scale = noise_multiplier * clip_norm if private else 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(w @ x.T)))  # runs x n
        grads = (p - y)[:, :, None] * x[None]  # runs x n x d
        norms = np.linalg.norm(grads, axis=2, keepdims=True)
        grads = grads * np.minimum(1.0, clip_norm / np.maximum(norms, 1e-300))
        w = w - learning_rate * (grads.sum(1) + scale * rng.standard_normal(w.shape))
        size = np.linalg.norm(w, axis=1, keepdims=True)
        w = w * np.minimum(1.0, radius / np.maximum(size, 1e-300))
    return ((x_test @ w.T > 0).T == y_test).mean(1)


def _steps(p: dict) -> np.ndarray:
    top, points = int(p["steps_max"]), int(p["steps_points"])
    if points <= 0:
        return np.arange(1, top + 1)
    return np.unique(np.geomspace(1, top, points).round().astype(np.int64))


def compute_shifted_interpolation(fig, rows):
    """eps(T) of the three bounds per (radius, learning-rate fraction), and a summary row
    per configuration with its plateau and the projected models' test accuracy."""
    del rows  # no sweeps: every number here is a closed form or a direct training run
    p = fig.params
    const = logistic_constants(p["dataset"])
    sigma, delta = float(p["noise_multiplier"]), float(p["delta"])
    lip = const["lipschitz"]
    steps = _steps(p)
    composition = np.array([full_batch_epsilon(delta, int(t), 1.0, sigma) for t in steps])
    heuristic = heuristic_epsilon_curve(delta, steps, 1.0, sigma)
    curves, summary = [], []
    for config, (radius, fraction) in enumerate(zip(p["radii"], p["lr_fractions"], strict=True)):
        lr = float(fraction) * const["max_learning_rate"]
        run = dict(
            noise_multiplier=sigma, clip_norm=lip, lipschitz=lip,
            smoothness=const["smoothness"], learning_rate=lr,
            num_examples=const["num_examples"], diameter=2.0 * float(radius),
        )  # fmt: skip
        bounds = [shifted_interpolation_bound(int(t), delta=delta, **run) for t in steps]
        for t, b, comp, heur in zip(steps, bounds, composition, heuristic, strict=True):
            curves.append(
                dict(config=config, radius=radius, lr_fraction=fraction, steps=int(t),
                     eps_composition=float(comp), eps_heuristic=float(heur),
                     eps_shifted_interpolation=b.epsilon, mu_shifted_interpolation=b.mu)
            )  # fmt: skip
        last = bounds[-1]
        plateau = shifted_interpolation_bound(last.plateau_steps, delta=delta, **run)
        acc = dict(private=None, nonprivate=None)
        if p["accuracy_runs"]:
            train = dict(radius=float(radius), learning_rate=lr, noise_multiplier=sigma,
                         clip_norm=lip, steps=int(p["steps_max"]), seed=int(p["seed"]))  # fmt: skip
            acc["private"] = float(
                projected_dpgd_accuracy(p["dataset"], runs=int(p["accuracy_runs"]), **train).mean()
            )
            acc["nonprivate"] = float(
                projected_dpgd_accuracy(p["dataset"], runs=1, private=False, **train)[0]
            )
        summary.append(
            dict(config=config, radius=radius, diameter=2.0 * radius, learning_rate=lr,
                 lr_fraction=fraction, lipschitz=lip, smoothness=const["smoothness"],
                 num_examples=const["num_examples"], noise_multiplier=sigma,
                 walk_steps=last.walk_steps, plateau_steps=last.plateau_steps,
                 mu_plateau=last.mu_plateau,
                 eps_shifted_interpolation_plateau=plateau.epsilon,
                 eps_composition_max=float(composition[-1]),
                 eps_shifted_interpolation_max=last.epsilon,
                 test_accuracy_private=acc["private"],
                 test_accuracy_nonprivate=acc["nonprivate"],
                 accuracy_runs=int(p["accuracy_runs"]),
                 bound_reference=last.reference)
        )  # fmt: skip
    return {"shifted_interpolation": summary, "shifted_interpolation_curves": curves}


def _sci(x: float) -> str:
    """LaTeX for x: 10^{k} when x is a power of ten, else its %g form."""
    k = round(math.log10(x))
    return f"10^{{{k}}}" if math.isclose(x, 10.0**k, rel_tol=1e-12) else f"{x:g}"


def plot_shifted_interpolation(fig, rows, tables):
    """eps(T) of composition, the heuristic and the bound per configuration (log T), the
    plateau t* marked; test accuracy in the legend."""
    del rows
    curves, summary = tables["shifted_interpolation_curves"], tables["shifted_interpolation"]
    plt = styled_pyplot()
    figure, ax = plt.subplots(figsize=(6.0, 3.8))
    first = [r for r in curves if r["config"] == 0]
    ts = [r["steps"] for r in first]
    ax.plot(ts, [r["eps_composition"] for r in first], **BOUND_STYLES["composition"])
    heur = dict(BOUND_STYLES["heuristic"], label="last-iterate heuristic (= composition, q = 1)")
    ax.plot(ts, [r["eps_heuristic"] for r in first], **heur)
    colors = plt.get_cmap("viridis")(np.linspace(0.0, 0.85, len(summary)))
    for s, color in zip(summary, colors, strict=True):
        rs = [r for r in curves if r["config"] == s["config"]]
        acc = s["test_accuracy_private"]
        label = (f"shifted interpolation, R = {s['radius']:g}, lr = {s['lr_fraction']:g} lr_max"
                 + ("" if acc is None else f" (test acc. {acc:.2f})"))  # fmt: skip
        ax.plot([r["steps"] for r in rs], [r["eps_shifted_interpolation"] for r in rs],
                color=color, lw=1.6, label=label)  # fmt: skip
        if s["plateau_steps"] <= ts[-1]:
            ax.plot([s["plateau_steps"]], [s["eps_shifted_interpolation_plateau"]], "o",
                    color=color, ms=4)
    ax.set_xscale("log")
    ax.set_xlabel(r"steps $T$ (only the last model released)")
    ax.set_ylabel(rf"$\varepsilon$ at $\delta = {_sci(fig.params['delta'])}$")
    fit_title(ax, f"projected logistic regression, breast_cancer, full batch, "
              f"$\\sigma$ = {fig.params['noise_multiplier']:g}, C = L = "
              f"{summary[0]['lipschitz']:.1f}; dots: plateau $t^*$\n"
              # Where the bound's formula comes from travels with the picture (and rows).
              "shifted interpolation: the closed form of the authors' code "
              "(arXiv:2403.00278);\nthe theorem's text was not checked here",
              fontsize=7)  # fmt: skip
    ax.legend(frameon=False, fontsize=6)
    return save_figure(figure, fig.out / "shifted_interpolation")
