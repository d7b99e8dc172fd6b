"""Tests of tfktopic.distributions: each closed form against TensorFlow
Probability (the independent reference, on TensorFlow), against Monte Carlo
where it is a KL or an expectation, and the same values and gradients under
JAX (tests/backends.py).

float32 tolerances: values and gradients against TFP within rtol 1e-5
(a few ulps after lnGamma / exp); TensorFlow vs JAX within rtol 1e-5
(the lgamma kernels differ in the last bits), plus atol 1e-5: the KL is a
sum of terms up to ~20 cancelling to ~0.04, so its float32 error is a few ulps
of those terms (2.4e-6 measured), not of the result.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from tests import distribution_cases as cases
from tests.backends import run_in_backend
from tfktopic import distributions

tfd = tfp.distributions
RTOL = 1e-5

RNG = np.random.default_rng(0)
# Weibull shapes / scales and gamma shapes / rates over the models' ranges.
K = RNG.uniform(0.3, 10.0, 64).astype(np.float32)
LAM = RNG.uniform(0.05, 5.0, 64).astype(np.float32)
ALPHA = RNG.uniform(0.05, 5.0, 64).astype(np.float32)
BETA = RNG.uniform(0.5, 3.0, 64).astype(np.float32)
U = RNG.uniform(0.01, 0.99, 64).astype(np.float32)
MEAN = RNG.normal(size=(8, 5)).astype(np.float32)
LOG_STD = RNG.normal(scale=0.5, size=(8, 5)).astype(np.float32)
COUNTS = RNG.poisson(2.0, 64).astype(np.float32)
RATE = RNG.uniform(0.1, 6.0, 64).astype(np.float32)
STOP = RNG.integers(0, 2, 64).astype(np.float32)
LOGITS = RNG.normal(scale=4.0, size=64).astype(np.float32)

CASES = [
    ("weibull_gamma_kl", {"k": K, "lam": LAM, "alpha": ALPHA, "beta": BETA}),
    ("weibull_mean", {"k": K, "lam": LAM}),
    ("weibull_sample", {"u": U, "k": K, "lam": LAM}),
    ("gaussian_standard_kl", {"mean": MEAN, "log_std": LOG_STD}),
    ("poisson_log_prob", {"x": COUNTS, "rate": RATE}),
    ("bernoulli_log_prob_from_logits", {"x": STOP, "logits": LOGITS}),
]


def _tfp_value_and_grads(fn, args):
    variables = [tf.Variable(a) for a in args]
    with tf.GradientTape() as tape:
        value = fn(*variables)
        total = tf.reduce_sum(value)
    return value.numpy(), [g.numpy() for g in tape.gradient(total, variables)]


def _assert_close(ours, reference):
    np.testing.assert_allclose(ours["value"], reference[0], rtol=RTOL, atol=1e-5)
    for grad, expected in zip(ours["grads"], reference[1]):
        np.testing.assert_allclose(grad, expected, rtol=RTOL, atol=1e-5)


def test_weibull_gamma_kl_matches_tfp_values_and_gradients():
    reference = _tfp_value_and_grads(
        lambda k, lam, a, b: tfd.kl_divergence(tfd.Weibull(k, lam), tfd.Gamma(a, rate=b)),
        [K, LAM, ALPHA, BETA])
    _assert_close(cases.weibull_gamma_kl(K, LAM, ALPHA, BETA), reference)


def test_weibull_mean_matches_tfp_values_and_gradients():
    reference = _tfp_value_and_grads(lambda k, lam: tfd.Weibull(k, lam).mean(), [K, LAM])
    _assert_close(cases.weibull_mean(K, LAM), reference)


def test_weibull_sample_is_the_inverse_cdf_of_tfp_weibull():
    x = cases.weibull_sample(U, K, LAM)["value"]
    np.testing.assert_allclose(tfd.Weibull(K, LAM).cdf(x).numpy(), U, rtol=RTOL, atol=1e-6)


def test_gaussian_standard_kl_matches_tfp_values_and_gradients():
    def reference_kl(mean, log_std):
        q = tfd.MultivariateNormalDiag(loc=mean, scale_diag=tf.exp(log_std))
        p = tfd.MultivariateNormalDiag(loc=tf.zeros_like(mean), scale_diag=tf.ones_like(mean))
        return tfd.kl_divergence(q, p)
    _assert_close(cases.gaussian_standard_kl(MEAN, LOG_STD),
                  _tfp_value_and_grads(reference_kl, [MEAN, LOG_STD]))


def test_poisson_log_prob_matches_tfp_values_and_gradients():
    reference = _tfp_value_and_grads(lambda rate: tfd.Poisson(rate=rate).log_prob(COUNTS), [RATE])
    _assert_close(cases.poisson_log_prob(COUNTS, RATE), reference)


def test_poisson_log_prob_is_finite_for_zero_counts_at_the_rate_floor():
    value = distributions.poisson_log_prob(np.zeros(3, np.float32),
                                           np.full(3, distributions.LOG_FLOOR, np.float32))
    np.testing.assert_allclose(np.asarray(value), 0.0, atol=1e-12)


def test_bernoulli_log_prob_matches_tfp_values_and_gradients_at_large_logits():
    logits = np.concatenate([LOGITS, np.float32([-80.0, 80.0])])
    stop = np.concatenate([STOP, np.float32([1.0, 0.0])])
    reference = _tfp_value_and_grads(
        lambda lg: tfd.Bernoulli(logits=lg, dtype=tf.float32).log_prob(stop), [logits])
    ours = cases.bernoulli_log_prob_from_logits(stop, logits)
    assert np.all(np.isfinite(ours["value"]))
    _assert_close(ours, reference)


def test_weibull_gamma_kl_and_mean_match_monte_carlo():
    k, lam, alpha, beta = (np.float64(v) for v in (1.5, 0.8, 0.7, 2.0))
    u = np.random.default_rng(1).uniform(size=400_000)
    x = np.asarray(distributions.weibull_sample(u, k, lam))
    assert abs(x.mean() - float(distributions.weibull_mean(k, lam))) < 4 * x.std() / np.sqrt(x.size)
    log_ratio = (tfd.Weibull(k, lam).log_prob(x) - tfd.Gamma(alpha, rate=beta).log_prob(x)).numpy()
    kl = float(distributions.weibull_gamma_kl(k, lam, alpha, beta))
    assert abs(log_ratio.mean() - kl) < 4 * log_ratio.std() / np.sqrt(x.size)


def test_gaussian_standard_kl_matches_monte_carlo():
    mean, log_std = np.float64([0.5, -1.0, 2.0]), np.float64([0.3, -0.4, 0.0])
    eps = np.random.default_rng(2).normal(size=(400_000, 3))
    x = mean + np.exp(log_std) * eps
    log_q = -0.5 * eps ** 2 - log_std
    log_p = -0.5 * x ** 2
    log_ratio = (log_q - log_p).sum(-1)
    kl = float(distributions.gaussian_standard_kl(mean, log_std))
    assert abs(log_ratio.mean() - kl) < 4 * log_ratio.std() / np.sqrt(len(x))


@pytest.mark.backends
def test_every_closed_form_gives_the_same_values_and_gradients_on_jax_as_on_tensorflow():
    theirs = run_in_backend("jax", "tests.distribution_cases:all_cases", cases=CASES)
    ours = cases.all_cases(CASES)
    for name, _ in CASES:
        np.testing.assert_allclose(ours[name]["value"], theirs[name]["value"], rtol=RTOL,
                                   atol=1e-5, err_msg=name)
        for grad, other in zip(ours[name]["grads"], theirs[name]["grads"]):
            np.testing.assert_allclose(grad, other, rtol=RTOL, atol=1e-5, err_msg=name)
