"""The closed forms of the package's distributions, written once in `keras.ops`.

Every model and layer that needs a density, a KL divergence, a mean or a
reparameterised draw calls this module (no TensorFlow Probability in library
code; TFP stays a test reference, tests/library/test_distributions.py). All functions
are elementwise and broadcast their arguments; the dtype is that of the first
tensor argument.

* `lgamma(x)` -- log Gamma(x); `keras.ops` has none, so it asks the backend
  hook (`tfktopic.backend`) for the framework's own kernel.
* `weibull_sample(u, k, lam)` -- Weibull(k, lam) by the inverse CDF,
  x = lam (-log(1 - u))^(1/k), u ~ U(0, 1) (WHAI, Zhang et al. 2018, §2.2;
  rGBN-RNN, Guo et al. 2020, §3.2).
* `weibull_mean(k, lam)` = lam Gamma(1 + 1/k).
* `weibull_gamma_kl(k, lam, alpha, beta)` -- KL(Weibull(k, lam) || Gamma(alpha,
  rate beta)) (WHAI eq. 6; rGBN-RNN eq. 7).
* `gaussian_standard_kl(mean, log_std)` -- KL(N(mu, diag sigma^2) || N(0, I))
  (TopicRNN, Dieng et al. 2017, §3 / Kingma & Welling 2014 App. B; TCNLM eq. 17).
* `poisson_log_prob(x, rate)` -- log Pois(x | rate) (rGBN-RNN eq. 7's likelihood).
* `bernoulli_log_prob_from_logits(x, logits)` -- log Bern(x | sigmoid(logits))
  (TopicRNN's stop-word indicator l_t, eq. 3).

Example:
>>> from keras import ops
>>> float(weibull_mean(ops.ones(()), ops.ones(())))   # Weibull(1, 1) = Exp(1)
1.0
>>> round(float(gaussian_standard_kl(ops.zeros((3,)), ops.zeros((3,)))), 6)
0.0
"""

import numpy as np
from keras import ops

from tfktopic import backend

__all__ = ["EULER_GAMMA", "LOG_FLOOR", "MIN_GAMMA_SHAPE", "lgamma", "weibull_sample",
           "weibull_mean", "weibull_gamma_kl", "gaussian_standard_kl", "poisson_log_prob",
           "bernoulli_log_prob_from_logits"]

#: The Euler-Mascheroni constant gamma = -Gamma'(1) (E[log Exp(1)] = -gamma).
EULER_GAMMA = float(np.euler_gamma)
#: The rGBN-RNN reference code's floor inside logarithms (``real_min``).
LOG_FLOOR = 2.2e-20
#: Floor on a gamma shape before lnGamma (reference rgbn_rnn.md §8.6).
MIN_GAMMA_SHAPE = 1e-10


def _framework_special(name, x):
    """The framework's own kernel `name` (``lgamma`` / ``digamma``) applied to x.

    `keras.ops` has neither (reference rgbn_rnn.md §8.1): this is the one place
    that picks TensorFlow's ``tf.math.<name>``, JAX's ``jax.lax.<name>`` or
    PyTorch's ``torch.<name>``.
    """
    x = ops.convert_to_tensor(x)
    if backend.is_tensorflow():
        import tensorflow as tf
        return getattr(tf.math, name)(x)
    if backend.is_jax():
        import jax
        return getattr(jax.lax, name)(x)
    import torch
    return getattr(torch, name)(x)


def lgamma(x):
    """log Gamma(x) elementwise, with its gradient digamma(x) (`_framework_special`).

    Args:
        x: float tensor (> 0 where used here).

    Returns:
        float tensor, same shape and dtype.
    """
    return _framework_special("lgamma", x)


def digamma(x):
    """digamma(x) = d log Gamma(x) / dx elementwise (`_framework_special`).

    Args:
        x: float tensor (> 0 where used here).

    Returns:
        float tensor, same shape and dtype.
    """
    return _framework_special("digamma", x)


def _as(value, dtype):
    return ops.cast(ops.convert_to_tensor(value), dtype)


def weibull_sample(u, k, lam):
    """Weibull(k, lam) draw from uniforms u by the inverse CDF (reparameterised).

    x = lam (-log(1 - u))^(1/k) (WHAI §2.2; rGBN-RNN §3.2), computed in log
    space, x = exp(log lam + log(-log1p(-u)) / k), so that d x / d k and
    d x / d lam stay finite. -log(1 - u) and lam are floored at `LOG_FLOOR`
    (the reference code's ``real_min``).

    Args:
        u: float tensor of uniforms in [0, 1), the broadcast shape of (k, lam).
        k: float tensor, Weibull shape (> 0).
        lam: float tensor, Weibull scale (> 0).

    Returns:
        float tensor of the broadcast shape, dtype of `u`.
    """
    u = ops.convert_to_tensor(u)
    k, lam = _as(k, u.dtype), _as(lam, u.dtype)
    exponential = ops.maximum(-ops.log1p(-u), LOG_FLOOR)
    return ops.exp(ops.log(ops.maximum(lam, LOG_FLOOR)) + ops.log(exponential) / k)


def weibull_mean(k, lam):
    """Mean of Weibull(k, lam): E[x] = lam Gamma(1 + 1/k).

    Args:
        k: float tensor, shape parameter (> 0); broadcasts against `lam`.
        lam: float tensor, scale parameter (> 0).

    Returns:
        float tensor of the broadcast shape (the dtype of `k`).
    """
    k = ops.convert_to_tensor(k)
    lam = _as(lam, k.dtype)
    return lam * ops.exp(lgamma(1.0 + 1.0 / k))


def weibull_gamma_kl(k, lam, alpha, beta=1.0):
    """KL(Weibull(k, lam) || Gamma(alpha, rate beta)), closed form, elementwise.

    The KL term of the ELBO (Guo et al. 2020, eq. 7; WHAI, Zhang et al. 2018,
    eq. 6; reference rgbn_rnn.md §1.3, whose code returns -KL). With gamma
    the Euler-Mascheroni constant, E_q[log x] = log lam - gamma / k and
    E_q[x] = lam Gamma(1 + 1/k), so minus the Weibull entropy
    (gamma (1 - 1/k) + log(lam / k) + 1) minus E_q[log Gamma(x; alpha, beta)]
    (alpha log beta - lnGamma(alpha) + (alpha - 1) E[log x] - beta E[x]) is

        KL = log k - alpha log(lam beta) + lnGamma(alpha)
             + gamma (alpha / k - 1) + lam beta Gamma(1 + 1/k) - 1.

    The numeric floors are applied to the inputs: k, lam and beta at
    `LOG_FLOOR` (2.2e-20, the reference code's floor inside logarithms) and
    alpha at `MIN_GAMMA_SHAPE` (1e-10, reference §8.6: tiny prior shapes such
    as Pi theta_{j-1} would otherwise give huge lnGamma values). Below a floor
    the gradient with respect to that input is zero. The prior's beta is a
    **rate** (p(x) ∝ x^(alpha-1) exp(-beta x)), as in the paper's
    "Gam(., tau0)" and the released ``KL_GamWei``.

    Args:
        k: Weibull shape (> 0), e.g. [B, J, 1] (one per sentence) or [B, J, K].
        lam: Weibull scale (> 0), [B, J, K].
        alpha: gamma shape of the prior (> 0), broadcastable.
        beta: gamma rate of the prior (> 0); the models use tau0 = 1.

    Returns:
        float tensor of the broadcast shape (the dtype of `k`): the KL per
        topic (sum it over topics / sentences yourself).
    """
    k = ops.convert_to_tensor(k)
    dtype = k.dtype
    k = ops.maximum(k, LOG_FLOOR)
    lam = ops.maximum(_as(lam, dtype), LOG_FLOOR)
    alpha = ops.maximum(_as(alpha, dtype), MIN_GAMMA_SHAPE)
    beta = ops.maximum(_as(beta, dtype), LOG_FLOOR)
    return (ops.log(k) - alpha * (ops.log(lam) + ops.log(beta)) + lgamma(alpha)
            + EULER_GAMMA * (alpha / k - 1.0) + lam * beta * ops.exp(lgamma(1.0 + 1.0 / k))
            - 1.0)


def gaussian_standard_kl(mean, log_std, axis=-1):
    """KL(N(mean, diag exp(log_std)^2) || N(0, I)), summed over `axis`.

    KL = 1/2 sum_k (mu_k^2 + sigma_k^2 - 2 log sigma_k - 1) (TopicRNN, Dieng
    et al. 2017, §3, the KL of the variational lower bound; Kingma & Welling
    2014, App. B; TCNLM, Wang et al. 2018, eq. 17).

    Args:
        mean: float [..., K], mu.
        log_std: float [..., K], log sigma.
        axis: the event axis summed over.

    Returns:
        float [...] (the dtype of `mean`).
    """
    mean = ops.convert_to_tensor(mean)
    log_std = _as(log_std, mean.dtype)
    return 0.5 * ops.sum(ops.square(mean) + ops.exp(2.0 * log_std) - 2.0 * log_std - 1.0,
                         axis=axis)


def poisson_log_prob(x, rate):
    """log Pois(x | rate) = x log rate - rate - lnGamma(x + 1), elementwise.

    The likelihood of rGBN-RNN's bag of words, d_j ~ Pois(Phi^1 theta^1_j)
    (Guo et al. 2020, eq. 7). x log rate is taken as 0 when x = 0 (so a zero
    rate with a zero count is finite).

    Args:
        x: counts (float or int tensor, >= 0).
        rate: float tensor (> 0).

    Returns:
        float tensor of the broadcast shape (the dtype of `rate`).
    """
    rate = ops.convert_to_tensor(rate)
    x = _as(x, rate.dtype)
    safe_log_rate = ops.log(ops.where(x > 0, rate, ops.ones_like(rate)))
    x_log_rate = ops.where(x > 0, x * safe_log_rate, ops.zeros_like(safe_log_rate))
    return x_log_rate - rate - lgamma(x + 1.0)


def bernoulli_log_prob_from_logits(x, logits):
    """log Bern(x | sigmoid(logits)) = x logits - softplus(logits), elementwise.

    TopicRNN's stop-word indicator l_t ~ Bernoulli(sigmoid(Gamma^T h_t))
    (Dieng et al. 2017, eq. 3). Stable for large |logits| (softplus).

    Args:
        x: float tensor of 0/1 outcomes.
        logits: float tensor, log(p / (1 - p)).

    Returns:
        float tensor of the broadcast shape (the dtype of `logits`).
    """
    logits = ops.convert_to_tensor(logits)
    x = _as(x, logits.dtype)
    return x * logits - ops.softplus(logits)
