"""The bundled datasets of the real-model mechanisms: scikit-learn's, split and standardised.

`load_dataset` returns a fixed train/test split of `load_breast_cancer` or `load_digits`
(they ship inside scikit-learn: nothing downloads; install the `models` extra), the
features standardised with the training set's statistics.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from advsim.validation import check_in_interval, check_int

__all__ = ["DATASETS", "Dataset", "load_dataset"]

DATASETS = ("breast_cancer", "digits")
"""The names `load_dataset` accepts (scikit-learn's bundled datasets)."""


class Dataset(NamedTuple):
    """A fixed train/test split, features standardised with the training set's statistics."""

    x_train: np.ndarray  # (n, p) float32
    y_train: np.ndarray  # (n,) int32
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int


@functools.lru_cache(maxsize=8)
def load_dataset(name: str, *, test_fraction: float = 0.25, split_seed: int = 0) -> Dataset:
    """One of scikit-learn's bundled datasets, split and standardised (nothing downloads).

    The split is a numpy permutation drawn from `split_seed` (`test_fraction` of the
    examples held out); every feature is centred and scaled by the training set's mean and
    standard deviation (constant features, such as digits' blank pixels, are only centred).

    Args:
        name: "breast_cancer" (569 x 30, 2 classes) or "digits" (1797 x 64, 10 classes).
        test_fraction: in (0, 1).
        split_seed: seed of the split.

    Returns:
        A `Dataset` of read-only arrays.

    Raises:
        ValueError: an unknown name or a test_fraction outside (0, 1).
        ImportError: scikit-learn is missing (install the `models` extra).
    """
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {name!r}")
    test_fraction = check_in_interval("test_fraction", test_fraction, 0.0, 1.0)
    split_seed = check_int("split_seed", split_seed, minimum=0)
    try:
        from sklearn import datasets
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the real-model mechanisms need scikit-learn's bundled datasets: "
            "pip install 'advsim[models]' (or pip install 'scikit-learn>=1.3')"
        ) from err
    loader = datasets.load_breast_cancer if name == "breast_cancer" else datasets.load_digits
    bunch = loader()
    x, y = np.asarray(bunch.data, np.float64), np.asarray(bunch.target, np.int32)
    order = np.random.default_rng(split_seed).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    mean, std = x[train].mean(0), x[train].std(0)
    std = np.where(std > 0, std, 1.0)
    arrays = [((x[i] - mean) / std).astype(np.float32) for i in (train, test)]
    out = Dataset(arrays[0], y[train], arrays[1], y[test], int(y.max()) + 1)
    for a in out[:4]:
        a.setflags(write=False)
    return out
