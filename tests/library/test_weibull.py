"""Tests of the Weibull layer (tfktopic.models.rgbn.weibull) and formulas (tfktopic.distributions).

q(theta) = Weibull(k, lam) (shape k, scale lam); the gamma prior is
Gamma(alpha, rate beta). Monte Carlo and TFP's distributions are the
independent references.
"""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from scipy import special, stats

from tfktopic.distributions import weibull_gamma_kl, weibull_mean
from tfktopic.models.rgbn.weibull import WeibullSampler

tfd = tfp.distributions

# (k, lam, alpha, beta): small/large shapes, sparse gamma priors, rate != 1.
PARAMS = np.array([
    [0.5, 0.3, 0.5, 1.0],
    [1.0, 1.0, 1.0, 2.0],
    [2.0, 2.0, 3.0, 0.5],
    [5.0, 4.0, 0.1, 1.0],
    [0.8, 10.0, 20.0, 3.0],
    [30.0, 0.05, 1e-3, 1.0],
], np.float64)


def test_kl_closed_form_matches_monte_carlo_with_tfp_distributions():
    k, lam, alpha, beta = (tf.constant(c) for c in PARAMS.T)
    q = tfd.Weibull(concentration=k, scale=lam)
    p = tfd.Gamma(concentration=alpha, rate=beta)
    x = q.sample(200_000, seed=tf.constant([1, 2], tf.int32))
    log_ratio = (q.log_prob(x) - p.log_prob(x)).numpy()
    mc_mean = log_ratio.mean(0)
    mc_se = log_ratio.std(0) / np.sqrt(len(log_ratio))
    closed = weibull_gamma_kl(k, lam, alpha, beta).numpy()
    assert np.all(np.abs(closed - mc_mean) < 5 * mc_se + 1e-6), (closed, mc_mean, mc_se)
    # TFP's registered analytic KL agrees to float64 precision.
    np.testing.assert_allclose(closed, tfd.kl_divergence(q, p).numpy(), rtol=1e-10, atol=1e-10)


def test_kl_uses_the_gamma_rate_not_the_scale():
    k, lam, alpha = 1.5, 2.0, 2.0
    kl = float(weibull_gamma_kl(k, lam, alpha, 4.0))
    q = tfd.Weibull(tf.constant(k, tf.float64), tf.constant(lam, tf.float64))
    with_rate = float(tfd.kl_divergence(q, tfd.Gamma(alpha, rate=tf.constant(4.0, tf.float64))))
    with_scale = float(tfd.kl_divergence(q, tfd.Gamma(alpha, rate=tf.constant(0.25, tf.float64))))
    assert kl == pytest.approx(with_rate, rel=1e-6)  # float32 inputs
    assert abs(kl - with_scale) > 1.0


def test_kl_prior_rate_defaults_to_1():
    """Gamma(alpha) without a rate is Gamma(alpha, rate 1), as in TFP."""
    q = tfd.Weibull(tf.constant(1.5, tf.float64), tf.constant(2.0, tf.float64))
    expected = float(tfd.kl_divergence(q, tfd.Gamma(tf.constant(2.0, tf.float64), 1.0)))
    assert float(weibull_gamma_kl(1.5, 2.0, 2.0)) == pytest.approx(expected, rel=1e-5)


def test_kl_is_zero_only_when_the_distributions_coincide():
    # Weibull(1, lam) = Exponential(rate 1/lam) = Gamma(1, rate 1/lam).
    assert float(weibull_gamma_kl(1.0, 2.0, 1.0, 0.5)) == pytest.approx(0.0, abs=1e-6)
    assert float(weibull_gamma_kl(1.0, 2.0, 1.0, 2.0)) > 0.1


def test_kl_floors_keep_degenerate_priors_finite():
    kl = weibull_gamma_kl(tf.constant([1.0, 1.0]), tf.constant([1.0, 1e-30]),
                          tf.constant([0.0, 1.0]), 1.0)
    assert np.all(np.isfinite(kl.numpy()))


# The model's ranges: k clipped to [0.1, 100] by the encoder, lam floored at
# 2.2e-20 (here 1e-19, just above the floor, so that its gradient flows), prior
# shapes alpha = tau0 * e floored at 1e-10 and up to tens, tau0 = beta ~ 1.
MODEL_KS = (0.1, 0.3, 1.0, 5.0, 100.0)
MODEL_LAMS = (1e-19, 1e-8, 1e-3, 1.0, 50.0)
MODEL_ALPHAS = (1e-10, 1e-3, 0.5, 1.0, 20.0)


def _expanded_closed_form(k, lam, alpha, beta):
    """KL(Weibull || Gamma) as minus the Weibull entropy minus E_q[log prior]
    (reference rgbn_rnn.md §1.3, the formula of the released ``KL_GamWei``;
    the package's previous implementation), with the same input floors."""
    gamma = np.euler_gamma
    k, lam = tf.maximum(k, 2.2e-20), tf.maximum(lam, 2.2e-20)
    alpha, beta = tf.maximum(alpha, 1e-10), tf.maximum(beta, 2.2e-20)
    log_lam = tf.math.log(lam)
    neg_entropy = -gamma * (1.0 - 1.0 / k) - log_lam + tf.math.log(k) - 1.0
    expected_log_prior = (alpha * tf.math.log(beta) - tf.math.lgamma(alpha)
                          + (alpha - 1.0) * (log_lam - gamma / k)
                          - beta * lam * tf.exp(tf.math.lgamma(1.0 + 1.0 / k)))
    return neg_entropy - expected_log_prior


def _values_and_gradients(fn, params, dtype):
    variables = [tf.Variable(c.astype(dtype)) for c in params.T[:3]]
    with tf.GradientTape() as tape:
        values = fn(*variables, tf.constant(params[:, 3].astype(dtype)))
        total = tf.reduce_sum(values)
    return values.numpy(), [g.numpy() for g in tape.gradient(total, variables)]


def test_kl_matches_the_expanded_closed_form_at_model_ranges_values_and_gradients():
    grid = np.array([p + (beta,) for p in itertools.product(MODEL_KS, MODEL_LAMS, MODEL_ALPHAS)
                     for beta in (1.0, 2.5)], np.float64)
    reference, reference_grads = _values_and_gradients(_expanded_closed_form, grid, np.float64)
    scale = np.maximum(np.abs(reference), 1.0)
    assert np.all(np.isfinite(reference)) and reference.max() > 1e6  # k = 0.1: Gamma(11) lam
    values, grads = _values_and_gradients(weibull_gamma_kl, grid, np.float64)
    np.testing.assert_array_less(np.abs(values - reference) / scale, 1e-12)
    for grad, expected in zip(grads, reference_grads):   # d/dk, d/dlam, d/dalpha
        # d/dlam ~ alpha / lam reaches 1e20: relative to max(|g|, 1).
        np.testing.assert_array_less(np.abs(grad - expected) / np.maximum(np.abs(expected), 1.0),
                                     1e-6)
    # float32 (the model's dtype) stays within a few ulps of the float64 value.
    values32, grads32 = _values_and_gradients(weibull_gamma_kl, grid, np.float32)
    np.testing.assert_array_less(np.abs(values32 - reference) / scale, 5e-6)
    for grad, expected in zip(grads32, reference_grads):
        assert np.all(np.isfinite(grad))
        np.testing.assert_array_less(np.abs(grad - expected) / np.maximum(np.abs(expected), 1.0),
                                     5e-5)


def test_kl_matches_monte_carlo_at_small_shapes_and_scales_near_the_floor():
    # (k, lam, alpha, beta): small k with scales near the floor (theta ~ 0),
    # sparse priors; per-sample log-ratio and its pathwise gradients
    # d/d(k, lam, alpha) of log q(x) - log p(x) at x = lam (-log u)^(1/k).
    params = np.array([
        [0.1, 1e-19, 1e-10, 1.0],
        [0.1, 1e-10, 0.05, 1.0],
        [0.3, 1e-6, 1e-3, 1.0],
        [0.5, 1e-3, 0.5, 1.0],
        # Not k = 1 or alpha = 1: TFP's log_probs hold (k - 1) and (alpha - 1)
        # in an xlogy, whose gradient TF sets to 0 where that factor is 0.
        [1.2, 0.1, 1.5, 2.0],
        [3.0, 2.0, 5.0, 1.0],
        [100.0, 0.5, 20.0, 1.0],
    ], np.float64)
    num = 100_000
    u = np.random.default_rng(12).uniform(size=(num, len(params)))
    tiled = [tf.Variable(np.tile(c, (num, 1))) for c in params.T[:3]]  # one copy per sample
    k, lam, alpha = tiled
    beta = tf.constant(params[:, 3])
    with tf.GradientTape() as tape:
        x = lam * tf.pow(-tf.math.log(tf.constant(u)), 1.0 / k)
        log_ratio = (tfd.Weibull(k, lam).log_prob(x)
                     - tfd.Gamma(concentration=alpha, rate=beta).log_prob(x))
        total = tf.reduce_sum(log_ratio)
    per_sample = [g.numpy() for g in tape.gradient(total, tiled)]      # each [num, P]
    closed, closed_grads = _values_and_gradients(weibull_gamma_kl, params, np.float64)
    # The d/dlam samples hold beta (-log u)^(1/k), whose tail at k = 0.1 is so
    # heavy (moments Gamma(1 + p/k)) that the sample standard deviation
    # underestimates the true one by ~20x at this size: its exact standard
    # error (Exponential moments, not the KL) is added to that tolerance.
    ks, betas = params[:, 0], params[:, 3]
    tail_se = betas * np.sqrt(special.gamma(1 + 2 / ks) - special.gamma(1 + 1 / ks) ** 2)
    tail_se = {"dlam": tail_se / np.sqrt(num)}
    for name, samples, expected in [("kl", log_ratio.numpy(), closed)] + list(
            zip(("dk", "dlam", "dalpha"), per_sample, closed_grads)):
        mean, se = samples.mean(0), samples.std(0) / np.sqrt(num)
        tolerance = 5 * (se + tail_se.get(name, 0.0)) + 1e-9 * np.abs(expected)
        assert np.all(np.abs(mean - expected) < tolerance), (name, mean, expected, se)


def test_sample_mean_matches_weibull_mean_and_distribution():
    sampler = WeibullSampler(seed=3)
    k = tf.constant([[0.7], [1.0], [3.0]])          # scalar k per row, broadcast
    lam = tf.constant([[0.5, 2.0], [1.0, 4.0], [2.0, 0.1]])
    n = 4000
    draws = sampler(tf.tile(k[None], (n, 1, 1)), tf.tile(lam[None], (n, 1, 1)),
                    training=True).numpy()
    mean = weibull_mean(k, lam).numpy()
    se = draws.std(0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * se), (draws.mean(0), mean)
    # The draws follow Weibull(k, lam) (KS test against the exact CDF).
    for i in range(3):
        for j in range(2):
            cdf = lambda x, kk=float(k[i, 0]), ll=float(lam[i, j]): 1 - np.exp(-(x / ll) ** kk)
            assert stats.kstest(draws[:, i, j], cdf).pvalue > 1e-3
    # Weibull(1, lam) is exponential: mean lam.
    np.testing.assert_allclose(mean[1], [1.0, 4.0], rtol=1e-6)


def test_inference_returns_the_mean_and_sample_overrides_training():
    sampler = WeibullSampler(seed=0)
    k, lam = tf.fill((2, 3, 1), 2.0), tf.fill((2, 3, 4), 3.0)
    mean = sampler(k, lam)
    np.testing.assert_allclose(mean.numpy(), 3.0 * 0.886226925, rtol=1e-5)  # Gamma(1.5)
    assert mean.shape == (2, 3, 4)
    np.testing.assert_array_equal(sampler(k, lam, training=True, sample=False).numpy(),
                                  mean.numpy())
    drawn = sampler(k, lam, training=False, sample=True).numpy()
    assert drawn.shape == (2, 3, 4) and np.std(drawn) > 0


def test_gradients_with_respect_to_k_and_lam_are_finite_and_pathwise_unbiased():
    sampler = WeibullSampler(seed=5)
    k = tf.Variable([[0.1], [1.0], [100.0]])
    lam = tf.Variable([[0.5, 2.0], [1.0, 1.0], [3.0, 0.2]])
    with tf.GradientTape(persistent=True) as tape:
        theta = sampler(tf.repeat(k, 20000, axis=0), tf.repeat(lam, 20000, axis=0),
                        training=True)
        sample_mean = tf.reduce_mean(tf.reshape(theta, (3, 20000, 2)), axis=1)
        objective = tf.reduce_sum(sample_mean)
        exact = tf.reduce_sum(weibull_mean(k, lam))
        kl = tf.reduce_sum(weibull_gamma_kl(k, lam, 2.0, 1.0))
    for target in (objective, kl):
        for grad in tape.gradient(target, [k, lam]):
            assert np.all(np.isfinite(grad.numpy()))
    # d theta / d lam = theta / lam, so the pathwise gradient of the mean is
    # exactly E[theta]/lam = Gamma(1 + 1/k) (within MC error).
    g_lam_mc, g_lam = tape.gradient(objective, lam).numpy(), tape.gradient(exact, lam).numpy()
    np.testing.assert_allclose(g_lam_mc[1:], g_lam[1:], rtol=0.05)
    g_k_mc, g_k = tape.gradient(objective, k).numpy(), tape.gradient(exact, k).numpy()
    np.testing.assert_allclose(g_k_mc[1:], g_k[1:], rtol=0.1, atol=1e-3)


def test_seeded_sampler_is_reproducible_and_draws_fresh_noise_in_tf_function():
    k, lam = tf.ones((4, 1)), tf.ones((4, 3))
    a = WeibullSampler(seed=11)(k, lam, training=True).numpy()
    b = WeibullSampler(seed=11)(k, lam, training=True).numpy()
    np.testing.assert_array_equal(a, b)
    sampler = WeibullSampler(seed=11)
    fn = tf.function(lambda: sampler(k, lam, training=True))
    first, second = fn().numpy(), fn().numpy()
    assert not np.array_equal(first, second)


def test_uniform_clip_bounds_the_draws():
    sampler = WeibullSampler(seed=2, uniform_eps=0.2)
    theta = sampler(tf.ones((5000, 1)), tf.ones((5000, 1)), training=True).numpy()
    assert theta.min() >= -np.log(0.8) - 1e-6 and theta.max() <= -np.log(0.2) + 1e-5


def test_get_config_round_trip_and_output_shape():
    sampler = WeibullSampler(seed=9, uniform_eps=1e-4, name="weibull")
    clone = WeibullSampler.from_config(sampler.get_config())
    assert clone.seed == 9 and clone.uniform_eps == 1e-4 and clone.name == "weibull"
    assert keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(sampler)).get_config() == sampler.get_config()
    assert sampler.compute_output_shape((None, 8, 1), (None, 8, 5)) == (None, 8, 5)


def test_declared_output_shape_broadcasts_like_the_drawn_sample():
    """Ranks differ (numpy broadcasting pads the shorter shape with 1s on the left), and an
    unknown axis against a 1 stays unknown."""
    sampler = WeibullSampler(seed=0)
    for k_shape, lam_shape in (((3, 1), (2, 1, 4)), ((2, 1, 4), (3, 1)), ((4,), (2, 3, 4)),
                               ((2, 3, 4), (1,)), ((1, 3, 4), (3, 4)), ((3, 4), (1, 3, 4))):
        drawn = sampler(tf.ones(k_shape), tf.ones(lam_shape), training=True)
        assert sampler.compute_output_shape(k_shape, lam_shape) == tuple(drawn.shape)
    assert sampler.compute_output_shape((None, 3), (1, 3)) == (None, 3)
    assert sampler.compute_output_shape((1, 3), (None, 3)) == (None, 3)


@pytest.mark.parametrize("kwargs, name", [({"uniform_eps": 0.5}, "uniform_eps"),
                                          ({"uniform_eps": -1e-3}, "uniform_eps"),
                                          ({"seed": 1.5}, "seed")])
def test_bad_arguments_raise_value_error_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        WeibullSampler(**kwargs)
