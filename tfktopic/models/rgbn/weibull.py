"""The Weibull sampling layer of rGBN-RNN / GBN-RNN (Guo et al. 2020).

The local topic proportions theta of the gamma belief network are inferred by a
Weibull distribution q(theta) = Weibull(k, lam) (shape k, scale lam), because

* it is reparameterisable by the inverse CDF:
  theta = lam * (-log(1 - u))^(1/k), u ~ U(0, 1);
* its KL divergence to the gamma prior is closed form.

The formulas live once in `tfktopic.distributions`:

* `weibull_sample(u, k, lam)`, the inverse-CDF draw;
* `weibull_mean(k, lam)` = lam * Gamma(1 + 1/k);
* `weibull_gamma_kl(k, lam, alpha, beta)` = KL(Weibull(k, lam) || Gamma(alpha, beta))
  with **beta a rate** (p(x) ∝ x^(alpha-1) exp(-beta x)), the parameterisation
  of the paper's ELBO (eq. 7, "Gam(., tau0)" with tau0 a rate) and of the
  released code's ``KL_GamWei`` (reference rgbn_rnn.md §1.3; used by
  `tfktopic.models.rgbn.prior`);

this module holds `WeibullSampler`, the reparameterised sampling layer that
`tfktopic.models.rgbn.encoder.RecurrentWeibullEncoder` draws theta with. Its
registered Keras name is ``tfktopic>WeibullSampler`` (unchanged by the move from
``tfktopic.layers``).
"""

import keras
import numpy as np
from keras import ops

from tfktopic.distributions import weibull_mean, weibull_sample

__all__ = ["WeibullSampler"]


@keras.saving.register_keras_serializable(package="tfktopic")
class WeibullSampler(keras.layers.Layer):
    """Reparameterised Weibull(k, lam) sample (training) or mean (inference).

    When drawing, theta = lam * (-log(1 - u))^(1/k) with u ~ U(0, 1)
    (Guo et al. 2020; reference rgbn_rnn.md §2.3). The reference code
    floors 1 - u at 2.2e-20; here u is clipped to [uniform_eps, 1 - uniform_eps]
    (reference §8.6 [REC]; this also covers that floor), and the power is
    taken in log space, theta = exp(log lam + log(-log1p(-u)) / k), so that
    gradients with respect to k and lam stay finite. Otherwise the layer
    returns the Weibull mean lam * Gamma(1 + 1/k).

    Small k makes theta and its mean explode ((-log(1-u))^(1/k) and
    Gamma(1 + 1/k) grow without bound): the encoder producing k should keep it
    in a sane range, e.g. [0.1, 100] (reference §8.6).

    Args:
        seed: seed of the uniform noise (a `keras.random.SeedGenerator` is
            created from it, so it is tracked and checkpointed with the layer).
        uniform_eps: the uniform draws are clipped to [eps, 1 - eps]
            (0 disables the clip; default 1e-6).

    Call args:
        k: float [..., 1] or [..., K] Weibull shape (broadcast against lam).
        lam: float [..., K] Weibull scale.
        training: draw a sample (True) or return the mean (False).
        sample: override `training`: force a sample (True) or the mean (False).

    Returns:
        theta, float of the broadcast shape of (k, lam).

    Example:
    >>> sampler = WeibullSampler(seed=1)
    >>> k, lam = keras.ops.ones((2, 3, 1)), keras.ops.ones((2, 3, 5))
    >>> tuple(sampler(k, lam, training=True).shape)
    (2, 3, 5)
    >>> float(sampler(k, lam)[0, 0, 0])  # the mean of Weibull(1, 1) = Exp(1)
    1.0
    """

    def __init__(self, seed=None, uniform_eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(uniform_eps) < 0.5:
            raise ValueError(f"uniform_eps must be in [0, 0.5), got {uniform_eps!r}")
        if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool)):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        self.seed = None if seed is None else int(seed)
        self.uniform_eps = float(uniform_eps)
        self.seed_generator = keras.random.SeedGenerator(self.seed)

    def call(self, k, lam, training=False, sample=None):
        k = ops.cast(k, self.compute_dtype)
        lam = ops.cast(lam, self.compute_dtype)
        draw = training if sample is None else sample
        if not draw:
            return weibull_mean(k, lam)
        shape = ops.shape(lam + ops.zeros_like(k))  # broadcast shape
        u = keras.random.uniform(shape, dtype=self.compute_dtype, seed=self.seed_generator)
        if self.uniform_eps > 0:
            u = ops.clip(u, self.uniform_eps, 1.0 - self.uniform_eps)
        return weibull_sample(u, k, lam)

    def compute_output_shape(self, k_shape, lam_shape):
        k_shape, lam_shape = tuple(k_shape), tuple(lam_shape)
        rank = max(len(k_shape), len(lam_shape))
        k_shape = (1,) * (rank - len(k_shape)) + k_shape
        lam_shape = (1,) * (rank - len(lam_shape)) + lam_shape
        return tuple(b if a == 1 else a if b == 1 else (a if a is not None else b)
                     for a, b in zip(k_shape, lam_shape))

    def get_config(self):
        return {**super().get_config(), "seed": self.seed, "uniform_eps": self.uniform_eps}
