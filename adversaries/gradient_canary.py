r"""The gradient-crafting adversaries of arXiv:2405.14457 (Cebere, Bellet & Papernot).

Each adversary chooses the canary's gradient before training (`craft`, which sets the
`canary_direction` of an `advsim.mechanisms.GradientCanary`) and scores the last model:

- `BiasedCoordinate` ($\mathcal{A}_{GC}$-R, Algorithm 2 there): the crafted gradient has
  norm $C$ in one coordinate $j$ (`BiasedCoordinate.random` draws $j$ uniformly from the
  adversary's seed); score $\theta_T[j] - \theta_0[j]$ in the canary's descent direction
  (Algorithm 4, with the sign flipped so that higher means "canary in").
- `RandomDirection` ($\mathcal{A}_{CotS}$, Algorithms 7-8, after Andrew et al. 2024): the
  crafted gradient is $C u$ for $u$ uniform on the unit sphere (from the adversary's
  seed); score the cosine of $u$ with $\theta_T - \theta_0$ (Algorithm 7) or, with
  `statistic="projection"`, $\langle u, \theta_T - \theta_0 \rangle$.
- `SimulatedBiasedDimension` ($\mathcal{A}_{GC}$-S, Algorithm 3): simulate training
  without the canary `runs` times (noisy: the engine's DP-SGD; noiseless: no noise and no
  clipping), rank coordinates by how much they moved (PerStep: $\sqrt{\sum (\theta_t -
  \theta_{t-1})^2}$ over steps and runs; FinalModel: $\sum |\theta_T - \theta_0|$ over
  runs), and bias the coordinate that moved least; same score as $\mathcal{A}_{GC}$-R.

A threshold test on these scores is invariant to a shift common to both worlds, so the
public drift the other examples cause (their mean gradient) needs no correction; what the
choice of coordinate changes is the *variance* the data add to it (batch sampling, and
the model's noise fed back through data-dependent gradients).
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from advsim import AbstractAdversary, AbstractDirectedCanary, AbstractMechanism, run_mechanism
from advsim.validation import check_int

__all__ = ["BiasedCoordinate", "RandomDirection", "SimulatedBiasedDimension"]


def _displacement(mechanism: AbstractMechanism, release) -> Float[Array, " d"]:
    last = release if release.ndim == 1 else release[-1]
    return last - mechanism.init_model()


def _check_craftable(mechanism: AbstractMechanism, who: str) -> int:
    if not isinstance(mechanism, AbstractDirectedCanary):
        raise TypeError(
            f"{who} crafts the canary gradient of a GradientCanary mechanism (an "
            f"advsim.AbstractDirectedCanary), got {type(mechanism).__name__}"
        )
    return int(mechanism.dim)


def _check_seed(seed) -> int:
    return check_int("seed", seed, minimum=0, maximum=2**63 - 1)


class BiasedCoordinate(AbstractAdversary):
    r"""$\mathcal{A}_{GC}$-R: a crafted gradient of norm $C$ in coordinate $j$ (Algorithm 2).

    Score $\theta_T[j] - \theta_0[j]$, the displacement in the canary's descent direction
    (Algorithm 4 of arXiv:2405.14457). With no other gradients and the canary inserted
    at $n$ of $T$ steps it is $\eta(nC + \mathcal{N}(0, T\sigma^2C^2))$ in, and
    $\eta\,\mathcal{N}(0, T\sigma^2C^2)$ out: $\mu = n / (\sqrt{T}\sigma)$-GDP.

    Where the other gradients react to the model, the canary's push along coordinate j can
    be undone, or overturned, by the last step: on `GradientCanary`'s `"logistic"` contract
    example (learning rate 1, features of scale up to 3) the logistic data overshoot along
    coordinate 3, and its in-world mean displacement is below the out-world's (-1.33
    against -0.65 at 20000 runs per world). `advsim.testing.check_adversary`'s sign check
    then fails, rightly: higher scores do not mean "canary in" for that pair, and an audit
    of it returns 0. Score a coordinate the data move little, or use `RandomDirection`.

    Args:
        coordinate: j >= 0 (below the mechanism's dimension).

    Example:
        >>> from advsim.mechanisms import GradientCanary
        >>> mech = BiasedCoordinate(2).craft(GradientCanary(5, 0.1, 1.0, dim=4))
        >>> mech.canary_direction.tolist()
        [0.0, 0.0, 1.0, 0.0]
    """

    # A 0-d integer array, traced: scoring every coordinate of a model compiles once.
    coordinate: np.ndarray

    def __init__(self, coordinate: int):
        self.coordinate = np.asarray(check_int("coordinate", coordinate, minimum=0), np.int32)

    @classmethod
    def random(cls, dim: int, *, seed: int) -> BiasedCoordinate:
        """Algorithm 2: a coordinate drawn uniformly from `{0, ..., dim - 1}` by `seed`."""
        dim = check_int("dim", dim, minimum=1)
        return cls(int(np.random.default_rng(_check_seed(seed)).integers(dim)))

    def craft(self, mechanism: AbstractMechanism) -> AbstractMechanism:
        dim = _check_craftable(mechanism, "BiasedCoordinate")
        j = int(self.coordinate)
        if j >= dim:
            raise ValueError(f"coordinate must be in [0, {dim - 1}], got {j}")
        return mechanism.with_direction(j)

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        return _displacement(mechanism, release)[self.coordinate]

    @classmethod
    def contract_examples(cls) -> dict[str, BiasedCoordinate]:
        """Instances for the contract suite, keyed by the mechanism example each is checked on."""
        return {"RealModelGradientCanary:logistic": cls(3)}


class RandomDirection(AbstractAdversary):
    r"""$\mathcal{A}_{CotS}$: a crafted gradient $C u$, $u$ uniform on the sphere (Alg. 7-8).

    $u = g / \lVert g \rVert$ with $g \sim \mathcal{N}(0, I_d)$ drawn from `seed` (numpy),
    so the direction is fixed before training. Scores (higher means "canary in"; $U =
    \theta_T - \theta_0$): `"cosine"` $\langle u, U \rangle / \lVert U \rVert$
    (Algorithm 7 of arXiv:2405.14457), `"projection"` $\langle u, U \rangle$ (the optimal
    statistic when the other gradients are zero: then it is exactly the biased
    coordinate's score rotated, so it audits the same epsilon).

    The score reads the crafted mechanism's `canary_direction` (the $u$ that `craft` set).

    Args:
        seed: the adversary's seed for $u$.
        statistic: "cosine" (default, the paper's) or "projection".
    """

    seed: int = eqx.field(static=True)
    statistic: str = eqx.field(static=True)

    def __init__(self, seed: int = 0, statistic: Literal["cosine", "projection"] = "cosine"):
        self.seed = _check_seed(seed)
        if statistic not in ("cosine", "projection"):
            raise ValueError(f"statistic must be 'cosine' or 'projection', got {statistic!r}")
        self.statistic = statistic

    def direction(self, dim: int) -> np.ndarray:
        """Algorithm 8: the unit vector $u$ for a model of dimension `dim`."""
        dim = check_int("dim", dim, minimum=1)
        g = np.random.default_rng(self.seed).normal(size=dim)
        return (g / np.linalg.norm(g)).astype(np.float32)

    def craft(self, mechanism: AbstractMechanism) -> AbstractMechanism:
        dim = _check_craftable(mechanism, "RandomDirection")
        return mechanism.with_direction(self.direction(dim))

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        disp = _displacement(mechanism, release)
        u = jnp.asarray(mechanism.canary_direction, disp.dtype)
        proj = jnp.dot(disp, u)
        if self.statistic == "projection":
            return proj
        norm = jnp.linalg.norm(disp)
        return jnp.where(norm > 0, proj / jnp.where(norm > 0, norm, 1.0), 0.0)

    @classmethod
    def contract_examples(cls) -> dict[str, RandomDirection]:
        """Instances for the contract suite, keyed by the mechanism example each is checked on."""
        return {"GradientCanary:logistic": cls(1)}


@eqx.filter_jit
def _trajectories(mechanism, keys, noisy: bool):
    """`(runs, T + 1, d)` trajectories of the run without the canary."""

    def noisy_run(key):
        return run_mechanism(mechanism, False, key=key, release="all")

    def noiseless_run(key):
        # Algorithm 3's noiseless simulation: no noise and no clipping; the batches are
        # Poisson-sampled like the engine's (the adversary does not know the real ones).
        m0 = mechanism.init_model()
        dtype = m0.dtype
        t = jnp.arange(1, mechanism.steps + 1, dtype=jnp.int32)
        group_counts = jnp.asarray(mechanism.data_counts())
        g = group_counts.shape[0]
        if g > 0 and mechanism.batching == "poisson":
            q = jnp.asarray(mechanism.sampling_prob, dtype)
            counts = jax.random.binomial(
                key, group_counts.astype(dtype), q, (mechanism.steps, g), dtype
            )
        else:
            counts = jnp.broadcast_to(group_counts.astype(dtype), (mechanism.steps, g))

        def body(m, xs):
            t_, n_ = xs
            grads = mechanism.data_gradients(m, t_)
            total = jnp.sum(n_[:, None] * grads, 0) + mechanism.regularizer_gradient(m, t_)
            m_next = m - jnp.asarray(mechanism.step_size(t_), dtype) * total
            return m_next, m_next

        _, traj = jax.lax.scan(body, m0, (t, counts))
        return jnp.concatenate([m0[None], traj], axis=0)

    return jax.vmap(noisy_run if noisy else noiseless_run)(keys)


class SimulatedBiasedDimension(AbstractAdversary):
    r"""$\mathcal{A}_{GC}$-S: bias the coordinate simulated training moves least (Alg. 3).

    Before training, the adversary simulates the run *without* the canary `runs` times
    from its own seed (it knows the data, the initialisation and the hyperparameters):
    `simulation="noisy"` runs the engine's DP-SGD (clipping, sampling, the same noise);
    `"noiseless"` runs it without noise or clipping. It ranks coordinates by
    `rank="per_step"`, $S_j = \sqrt{\sum_{runs}\sum_t (\theta_{t,j} - \theta_{t-1,j})^2}$,
    or `"final_model"`, $S_j = \sum_{runs} |\theta_{T,j} - \theta_{0,j}|$, crafts the
    gradient of norm $C$ in $j^* = \arg\min_j S_j$, and scores
    $\theta_T[j^*] - \theta_0[j^*]$ like $\mathcal{A}_{GC}$-R. Appendix C of
    arXiv:2405.14457 uses 4 runs and finds noiseless / per-step best (Figure 4 there).

    Args:
        simulation: "noiseless" (default) or "noisy".
        rank: "per_step" (default) or "final_model".
        runs: simulated runs r >= 1 (default 4).
        seed: the adversary's seed for the simulation's sampling (and noise).
    """

    simulation: str = eqx.field(static=True)
    rank: str = eqx.field(static=True)
    runs: int = eqx.field(static=True)
    seed: int = eqx.field(static=True)

    def __init__(
        self,
        simulation: Literal["noiseless", "noisy"] = "noiseless",
        rank: Literal["per_step", "final_model"] = "per_step",
        runs: int = 4,
        seed: int = 0,
    ):
        if simulation not in ("noiseless", "noisy"):
            raise ValueError(f"simulation must be 'noiseless' or 'noisy', got {simulation!r}")
        if rank not in ("per_step", "final_model"):
            raise ValueError(f"rank must be 'per_step' or 'final_model', got {rank!r}")
        self.simulation = simulation
        self.rank = rank
        self.runs = check_int("runs", runs, minimum=1)
        self.seed = _check_seed(seed)

    def statistic(self, mechanism: AbstractMechanism) -> np.ndarray:
        """$S_j$ for every coordinate (Algorithm 3 before the argmin), float64, shape (d,)."""
        _check_craftable(mechanism, "SimulatedBiasedDimension")
        keys = jax.random.split(jax.random.key(self.seed), self.runs)
        traj = np.asarray(_trajectories(mechanism, keys, self.simulation == "noisy"), np.float64)
        if self.rank == "per_step":
            return np.sqrt(np.sum(np.square(np.diff(traj, axis=1)), axis=(0, 1)))
        return np.sum(np.abs(traj[:, -1] - traj[:, 0]), axis=0)

    def select(self, mechanism: AbstractMechanism) -> int:
        """The coordinate $j^*$ the simulated training moves least (lowest index on ties)."""
        return int(np.argmin(self.statistic(mechanism)))

    def craft(self, mechanism: AbstractMechanism) -> AbstractMechanism:
        return mechanism.with_direction(self.select(mechanism))  # select checks the kind

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        # The crafted direction is e_{j*}, so this is theta_T[j*] - theta_0[j*].
        disp = _displacement(mechanism, release)
        return jnp.dot(disp, jnp.asarray(mechanism.canary_direction, disp.dtype))

    @classmethod
    def contract_examples(cls) -> dict[str, SimulatedBiasedDimension]:
        """Instances for the contract suite, keyed by the mechanism example each is checked on."""
        return {"GradientCanary:logistic": cls()}
