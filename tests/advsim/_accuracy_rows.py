"""The constructions of the exact engine's accuracy table, defined once.

`tests/advsim/test_exact.py::_accuracy_rows` checks them against the values known before
the engine; `tests/advsim/test_exact_adaptive.py::PINNED` against the values the fixed
three grids gave at commit 4c8d5f3. Both must read the same constructions, so both build
them here from the same `(name, *args)` row.
"""

from advsim.mechanisms import (
    LinearProcess,
    ProjectedLinearCanary,
    QuadraticRegularizer,
    ThresholdLandscape,
    ZeroingRegularizer,
)


def accuracy_mechanism(name: str, *args):
    """The mechanism of an accuracy row.

    Args:
        name: "linear" (args: T, q, sigma), "landscape" (T, B; sigma = 1), "quadratic"
            (alpha; T = 3, q = 0.1, sigma = 1), "zeroing" (none; T = 10, q = 0.01,
            sigma = 0.5) or "projected" (none; T = 50, sigma = 1, R = 0.5).
        *args: the row's own values.
    """
    builders = {
        "linear": lambda t, q, sigma: LinearProcess(t, q, sigma),
        "landscape": lambda t, b: ThresholdLandscape(t, 1.0, b),
        "quadratic": lambda alpha: QuadraticRegularizer(3, 0.1, 1.0, alpha=alpha),
        "zeroing": lambda: ZeroingRegularizer(10, 0.01, 0.5),
        "projected": lambda: ProjectedLinearCanary(50, 1.0, radius=0.5),
    }
    return builders[name](*args)
