r"""Gradient fields of a scalar model as data, and the DP-SGD runs built from them.

The 1-D constructions of the hidden-state papers are DP-SGD runs on a scalar model whose
gradients are functions of the model value and the step. This module is their one
vocabulary, used by the search (`advsim.search`), the property tests' strategies
(`advsim.testing`) and any construction of your own:

- a field (`AbstractField`) is data: float64 numpy arrays of parameters, called as
  $g(m, t)$ and jittable, with bounds on its slope read off the arrays;
- `ScalarField` is a sum of smooth and kinked terms: affine, ramps at knots, tanh bumps,
  Holder roots and jumps (the same at every step);
- `PiecewiseField` is piecewise linear between knots, with a jump allowed at each knot and
  optionally one row of values per step;
- a field declares its own jumps (`breakpoints()`: a `ScalarField`'s jump positions, a
  `PiecewiseField`'s knots when it has jumps), and a construction built from fields
  (`AbstractFieldConstruction`: the canary's field, the data groups' fields with their counts, the
  regularizer's field) gathers them in `field_breakpoints()`, so the exact engine
  (`advsim.exact`) splits the grid at every jump the fields hold.

`advsim.mechanisms.PiecewiseConstruction` (the searched family, saved to and loaded from
small JSON files) and `advsim.testing.ScalarFieldConstruction` (the property tests' random
runs) are the two `AbstractFieldConstruction`s of the package.

Example:
    >>> import jax.numpy as jnp
    >>> smooth = ScalarField(offset=-1.0, knots=[0.0], knot_slopes=[2.0], jumps=[1.0],
    ...                      jump_heights=[0.5])
    >>> piecewise = PiecewiseField(knots=[0.5], values=[1.0], jumps=[-2.0])
    >>> [float(v) for v in smooth(jnp.array([-1.0, 1.0]))], smooth.breakpoints().tolist()
    ([-1.0, 1.5], [1.0])
    >>> [float(v) for v in piecewise(jnp.array([0.0, 1.0]))], piecewise.breakpoints().tolist()
    ([1.0, -1.0], [0.5])
"""

from advsim.mechanisms._field import AbstractField, AbstractFieldConstruction
from advsim.mechanisms._piecewise_field import PiecewiseField
from advsim.mechanisms._scalar_field import ScalarField

__all__ = ["AbstractField", "AbstractFieldConstruction", "PiecewiseField", "ScalarField"]
