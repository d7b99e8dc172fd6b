"""Tests of the SGLD / pSGLD optimizers (tfktopic.bayes.sgmcmc).

Conventions under test (see the module docstring): ḡ = gradient of the mean
loss, η = learning_rate, N = num_examples, paper step ε = 2η/N,
θ ← θ − η·G·(ḡ + (prior_precision/N)·θ) + sqrt(2·η·T·G/N)·ξ.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfktopic.bayes import PSGLD, SGLD
from tfktopic.bayes.counter_random import stateless_standard_normal

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.backends

#: Tests whose harness is TensorFlow's own (a tf.GradientTape sampler loop, tf.IndexedSlices,
#: the TensorFlow-only XLA-fused step); the JAX job skips them.
tensorflow_only = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                     reason="a TensorFlow harness (tape, IndexedSlices, fused step)")


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def _dense_model(in_dim=4, out_dim=3, seed=0):
    rng = np.random.default_rng(seed)
    model = keras.Sequential(
        [keras.Input((in_dim,)), keras.layers.Dense(8, activation="tanh"),
         keras.layers.Dense(out_dim)])
    model.set_weights([rng.normal(size=w.shape).astype("float32") * 0.5
                       for w in model.get_weights()])
    return model


def _regression_data(n=32, in_dim=4, out_dim=3, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, in_dim)).astype("float32")
    y = rng.normal(size=(n, out_dim)).astype("float32")
    return x, y


def _fit_weights(optimizer, epochs=3, jit_compile=False, batch_size=8):
    x, y = _regression_data()
    model = _dense_model()
    model.compile(optimizer=optimizer, loss="mse", jit_compile=jit_compile)
    model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0)
    return model.get_weights()


def _run_steps(optimizer, grads_fn, init, steps):
    """Apply `steps` updates to variables initialised from `init`; return trajectory."""
    variables = [keras.Variable(v) for v in init]
    optimizer.build(variables)
    trajectory = []
    for t in range(steps):
        grads = grads_fn(t, [np.asarray(v) for v in variables])
        optimizer.apply_gradients(zip([tf.constant(g) for g in grads], variables))
        trajectory.append([np.asarray(v).copy() for v in variables])
    return trajectory


def _random_grads(t, values):
    rng = np.random.default_rng(100 + t)
    return [rng.normal(size=v.shape).astype("float32") + 0.1 * v for v in values]


_INIT = [np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4),
         np.array([0.3, -0.2, 0.0], "float32")]


# --------------------------------------------------------------------------
# 1. Bayesian linear regression with a known Gaussian posterior
# --------------------------------------------------------------------------
N_DATA, DIM, CHAINS, NOISE_SD, PRIOR_PREC = 200, 2, 256, 0.8, 2.0


def _linreg_problem():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N_DATA, DIM)).astype("float32") * np.float32([1.0, 0.5])
    x[:, 1] += 0.5 * x[:, 0]  # correlated posterior
    y = x @ np.float32([0.7, -1.2]) + NOISE_SD * rng.normal(size=N_DATA).astype("float32")
    precision = PRIOR_PREC * np.eye(DIM) + x.T @ x / NOISE_SD**2
    cov = np.linalg.inv(precision)
    mean = cov @ (x.T @ y) / NOISE_SD**2
    return x, y, mean, cov


def _sample_linreg(optimizer, steps, burn_in, thin):
    """Run CHAINS independent chains (columns of W) and collect thinned samples.

    The loss of chain c is the mean Gaussian NLL (1/N) Σ_n (y_n − x_n·w_c)²/(2σ²),
    so ḡ is the gradient of a mean loss and prior_precision is the prior.
    """
    x, y, mean, _ = _linreg_problem()
    xt, yt = tf.constant(x), tf.constant(y[:, None])
    w = keras.Variable(np.tile(mean[:, None], (1, CHAINS)).astype("float32"))
    optimizer.build([w])

    @tf.function
    def block(n):
        for _ in tf.range(n):
            residual = tf.matmul(xt, w.value) - yt
            grad = tf.matmul(xt, residual, transpose_a=True) / (N_DATA * NOISE_SD**2)
            optimizer.apply_gradients([(grad, w)])
        return tf.identity(w.value)

    block(burn_in)
    samples = np.stack([np.asarray(block(thin)) for _ in range((steps - burn_in) // thin)])
    samples = samples.transpose(0, 2, 1).reshape(-1, DIM)
    return samples.mean(0), np.cov(samples.T)


@pytest.mark.parametrize(
    "make_optimizer, steps",
    [
        # ε = 2η/N = 1e-4; ε·λ_max(A)/2 ≈ 0.02 -> discretisation bias ~1-2 %.
        (lambda: SGLD(learning_rate=0.01, num_examples=N_DATA,
                      prior_precision=PRIOR_PREC, seed=3), 8000),
        # Full-batch pSGLD. Without the Γ term, G must be nearly constant along
        # the chain: 1/(1−ρ) = 2000 steps ≫ the chain's autocorrelation time
        # (~250 steps here). With ρ = 0.999 and η = 1e-4 the two are comparable,
        # V follows the chain's position and the samples are ~15 % too wide.
        (lambda: PSGLD(learning_rate=1e-3, num_examples=N_DATA, rho=0.9995,
                       prior_precision=PRIOR_PREC, seed=3), 12000),
    ],
    ids=["sgld", "psgld"],
)
@tensorflow_only
def test_samples_match_analytic_posterior(make_optimizer, steps):
    _, _, mean, cov = _linreg_problem()
    est_mean, est_cov = _sample_linreg(make_optimizer(), steps, burn_in=3000, thin=10)
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(est_mean - mean) / sd, 0.15)
    rel = np.linalg.norm(est_cov - cov) / np.linalg.norm(cov)
    assert rel < 0.1, (est_cov, cov)
    # A sampler that collapses (T ignored) or over-disperses fails here:
    np.testing.assert_allclose(np.diag(est_cov), np.diag(cov), rtol=0.1)


@tensorflow_only
def test_temperature_zero_collapses_to_the_mode():
    _, _, mean, cov = _linreg_problem()
    optimizer = SGLD(learning_rate=0.01, num_examples=N_DATA,
                     prior_precision=PRIOR_PREC, temperature=0.0)
    est_mean, est_cov = _sample_linreg(optimizer, 2000, burn_in=1000, thin=10)
    np.testing.assert_allclose(est_mean, mean, atol=1e-3)
    assert np.abs(est_cov).max() < 1e-6 * np.abs(cov).max()


# --------------------------------------------------------------------------
# 2. T = 0 reduces to SGD / RMSprop
# --------------------------------------------------------------------------
def _schedule():
    return keras.optimizers.schedules.ExponentialDecay(0.05, decay_steps=3, decay_rate=0.5)


def test_sgld_at_zero_temperature_is_sgd():
    # With T = 0 and a flat prior SGLD(learning_rate=η) is SGD(learning_rate=η);
    # schedules and clipping come from the shared base class.
    sgd = _fit_weights(keras.optimizers.SGD(learning_rate=_schedule(), global_clipnorm=0.5))
    sgld = _fit_weights(SGLD(learning_rate=_schedule(), num_examples=32, temperature=0.0,
                             prior_precision=0.0, global_clipnorm=0.5))
    for a, b in zip(sgd, sgld):
        np.testing.assert_array_equal(a, b)


def test_sgld_prior_is_weight_decay_scaled_by_one_over_n():
    n, prec, lr = 50, 3.0, 0.1
    opt = SGLD(learning_rate=lr, num_examples=n, temperature=0.0, prior_precision=prec)
    traj = _run_steps(opt, _random_grads, _INIT, 3)
    values = [v.copy() for v in _INIT]
    for t in range(3):
        grads = _random_grads(t, values)
        values = [v - np.float32(lr) * (g + np.float32(prec / n) * v)
                  for v, g in zip(values, grads)]
        for got, want in zip(traj[t], values):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_psgld_at_zero_temperature_is_rmsprop():
    # Keras RMSprop puts epsilon inside the square root: sqrt(V + eps).
    rms = _fit_weights(keras.optimizers.RMSprop(learning_rate=_schedule(), rho=0.95,
                                                epsilon=1e-7, clipnorm=0.3))
    psgld = _fit_weights(PSGLD(learning_rate=_schedule(), num_examples=32, temperature=0.0,
                               prior_precision=0.0, rho=0.95, epsilon=1e-7,
                               epsilon_placement="inside", v_init="zeros", clipnorm=0.3))
    for a, b in zip(rms, psgld):
        np.testing.assert_array_equal(a, b)


def _numpy_psgld(values, steps, lr, n, temperature, prec, rho, eps, placement, v_init, seed,
                 v_floor=0.0, grads_fn=None, bits=16, noise_burnin=0):
    """Hand-written reference of the full pSGLD update, with the same noise draws."""
    sq = [np.ones_like(v) if v_init == "ones" else np.zeros_like(v) for v in values]
    out = []
    for t in range(steps):
        grads = (grads_fn or _random_grads)(t, values)
        new_values = []
        for i, (v, g) in enumerate(zip(values, grads)):
            s = np.float32(rho) * sq[i] + np.float32(1 - rho) * np.square(g)
            if v_init == "first_gradient" and t == 0:
                s = np.square(g)
                s = np.where(s > 0, s, s[s > 0].mean() if (s > 0).any() else 1.0)
            sq[i] = s
            s = np.maximum(s, np.float32(v_floor))
            if placement == "outside":
                denom = np.sqrt(s) + np.float32(eps)
            else:
                denom = np.sqrt(s + np.float32(eps))
            drift = np.float32(lr) * (g + np.float32(prec / n) * v) / denom
            xi = np.asarray(stateless_standard_normal(v.shape, seed, i, bits=bits, step=t))
            noise = np.sqrt(np.float32(lr) * np.float32(2 * temperature / n) / denom) * xi
            if t < noise_burnin:
                noise = np.zeros_like(noise)
            new_values.append(v - (drift - noise))
        values = new_values
        out.append(values)
    return out


@pytest.mark.parametrize("placement, v_init, temperature, bits", [
    ("outside", "zeros", 0.0, 16),
    ("outside", "ones", 1.0, 16),
    ("inside", "first_gradient", 0.7, 23),
])
def test_psgld_matches_hand_written_update(placement, v_init, temperature, bits):
    kw = dict(lr=2e-3, n=40, temperature=temperature, prec=1.5, rho=0.99, eps=1e-5,
              placement=placement, v_init=v_init, seed=11, bits=bits)
    opt = PSGLD(learning_rate=kw["lr"], num_examples=kw["n"], temperature=temperature,
                prior_precision=kw["prec"], rho=kw["rho"], epsilon=kw["eps"],
                epsilon_placement=placement, v_init=v_init, seed=kw["seed"], noise_bits=bits)
    got = _run_steps(opt, _random_grads, _INIT, 4)
    want = _numpy_psgld([v.copy() for v in _INIT], 4, **kw)
    for got_t, want_t in zip(got, want):
        for a, b in zip(got_t, want_t):
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


def test_psgld_matches_hand_written_update_at_the_edges_of_its_settings():
    """One variable (its noise streams are t·1 + 0), a prior precision below 1, and
    noise_burnin_steps=1 (step 0 without noise, then noise)."""
    init = [np.linspace(-1, 1, 6, dtype="float32")]
    kw = dict(lr=2e-3, n=40, temperature=1.0, prec=0.5, rho=0.99, eps=1e-5,
              placement="outside", v_init="zeros", seed=5, noise_burnin=1)
    opt = PSGLD(learning_rate=kw["lr"], num_examples=kw["n"], prior_precision=kw["prec"],
                rho=kw["rho"], epsilon=kw["eps"], v_init="zeros", seed=5,
                noise_burnin_steps=1)
    got = _run_steps(opt, _random_grads, init, 3)
    want = _numpy_psgld([v.copy() for v in init], 3, **kw)
    for got_t, want_t in zip(got, want):
        np.testing.assert_allclose(got_t[0], want_t[0], rtol=2e-6, atol=1e-7)
    no_prior = _numpy_psgld([v.copy() for v in init], 1, **{**kw, "prec": 0.0})
    assert not np.allclose(got[0][0], no_prior[0][0], rtol=0, atol=1e-7)
    noisy_first = _numpy_psgld([v.copy() for v in init], 1, **{**kw, "noise_burnin": 0})
    assert not np.allclose(got[0][0], noisy_first[0][0], rtol=1e-3)


def test_psgld_defaults_public_squared_average_and_a_floor_below_one():
    """The documented defaults (learning rate 1e-3 for pSGLD, 1e-2 for SGLD, prior precision
    1), `squared_average`
    (the V of a variable), and a floor of 0.5 over gradients of ~0.1 that only it lifts."""
    opt = PSGLD(num_examples=10)
    assert float(np.asarray(opt.learning_rate)) == pytest.approx(1e-3)
    assert opt.prior_precision == 1.0
    sgld = SGLD(num_examples=10)
    assert float(np.asarray(sgld.learning_rate)) == pytest.approx(1e-2)
    assert sgld.prior_precision == 1.0
    var = keras.Variable(np.zeros(3, "float32"))
    opt.apply_gradients([(np.array([0.1, 0.0, 0.2], "float32"), var)])
    assert opt.squared_average(var) is opt._sq_averages[0]
    np.testing.assert_allclose(np.asarray(opt.squared_average(var)), [0.01, 0.025, 0.04],
                               rtol=1e-6)   # first_gradient: the empty slot gets the mean
    small = np.full((2, 3), 0.1, "float32")
    kw = dict(lr=2e-3, n=40, temperature=1.0, prec=1.5, rho=0.99, eps=1e-5,
              placement="outside", v_init="zeros", seed=11, v_floor=0.5,
              grads_fn=lambda t, values: [small + 0.01 * t for _ in values])
    floored = PSGLD(learning_rate=kw["lr"], num_examples=kw["n"], prior_precision=kw["prec"],
                    rho=kw["rho"], epsilon=kw["eps"], v_init="zeros", v_floor=0.5, seed=11)
    got = _run_steps(floored, kw["grads_fn"], [np.zeros((2, 3), "float32")], 2)
    want = _numpy_psgld([np.zeros((2, 3), "float32")], 2, **kw)
    unfloored = _numpy_psgld([np.zeros((2, 3), "float32")], 2, **{**kw, "v_floor": 0.0})
    for got_t, want_t, other_t in zip(got, want, unfloored):
        np.testing.assert_allclose(got_t[0], want_t[0], rtol=2e-6, atol=1e-7)
        assert not np.allclose(got_t[0], other_t[0])


def test_psgld_v_floor_matches_hand_written_update():
    # Gradients of size ~1 against a floor of 4: the floor is active everywhere.
    kw = dict(lr=2e-3, n=40, temperature=1.0, prec=1.5, rho=0.99, eps=1e-5,
              placement="outside", v_init="zeros", seed=11, v_floor=4.0)
    opt = PSGLD(learning_rate=kw["lr"], num_examples=kw["n"], prior_precision=kw["prec"],
                rho=kw["rho"], epsilon=kw["eps"], v_init="zeros", v_floor=4.0, seed=11)
    got = _run_steps(opt, _random_grads, _INIT, 3)
    want = _numpy_psgld([v.copy() for v in _INIT], 3, **kw)
    unfloored = _numpy_psgld([v.copy() for v in _INIT], 3, **{**kw, "v_floor": 0.0})
    for got_t, want_t, other_t in zip(got, want, unfloored):
        for a, b, c in zip(got_t, want_t, other_t):
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)
            assert not np.allclose(a, c)
    # V itself (the slot) is not floored: the floor acts inside G only.
    assert float(np.asarray(opt._sq_averages[0]).min()) < 4.0


def test_sparse_v_hold_keeps_v_of_coordinates_without_gradient():
    var = keras.Variable(np.zeros(3, "float32"))
    opt = PSGLD(learning_rate=1e-3, num_examples=10, temperature=0.0, rho=0.5,
                v_init="zeros", sparse_v="hold")
    decay = PSGLD(learning_rate=1e-3, num_examples=10, temperature=0.0, rho=0.5,
                  v_init="zeros")
    other = keras.Variable(np.zeros(3, "float32"))
    for g in ([2.0, 2.0, 0.0], [0.0, 4.0, 0.0]):
        opt.apply_gradients([(np.array(g, "float32"), var)])
        decay.apply_gradients([(np.array(g, "float32"), other)])
    # coordinate 0: 0.5*4 = 2 after step 1, held at 2 on step 2 (decay: 1).
    np.testing.assert_allclose(np.asarray(opt._sq_averages[0]), [2.0, 0.5 * 2 + 0.5 * 16, 0.0])
    np.testing.assert_allclose(np.asarray(decay._sq_averages[0]), [1.0, 9.0, 0.0])


def _sparse_grads(t, values):
    grads = _random_grads(t, values)
    grads[0][t % 3] = 0.0  # one row of the matrix without gradient per step
    return grads


def test_sparse_v_hold_matches_hand_written_lazy_update():
    kw = dict(lr=2e-3, n=40, temperature=1.0, prec=0.0, rho=0.9, eps=1e-5,
              placement="outside", v_init="ones", seed=5)
    opt = PSGLD(learning_rate=kw["lr"], num_examples=kw["n"], prior_precision=0.0,
                rho=0.9, v_init="ones", sparse_v="hold", seed=5)
    got = _run_steps(opt, _sparse_grads, _INIT, 4)
    # Lazy V by hand: rows without gradient keep V, the rest decay as usual.
    values, sq = [v.copy() for v in _INIT], [np.ones_like(v) for v in _INIT]
    for t in range(4):
        grads = _sparse_grads(t, values)
        for i, g in enumerate(grads):
            s = np.float32(0.9) * sq[i] + np.float32(0.1) * np.square(g)
            sq[i] = np.where(g != 0, s, sq[i])
            denom = np.sqrt(sq[i]) + np.float32(1e-5)
            xi = np.asarray(stateless_standard_normal(g.shape, 5, i, bits=16, step=t))
            noise = np.sqrt(np.float32(2e-3) * np.float32(2 / 40) / denom) * xi
            values[i] = values[i] - (np.float32(2e-3) * g / denom - noise)
        for a, b in zip(got[t], values):
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("cls", [SGLD, PSGLD])
@tensorflow_only
def test_fused_update_equals_unfused(cls, xla_loops_on, monkeypatch):
    kwargs = dict(learning_rate=1e-2, num_examples=20, seed=4)
    fused_optimizer = cls(**kwargs)
    fused = _run_steps(fused_optimizer, _random_grads, _INIT, 4)
    assert fused_optimizer._fused_step is not None      # the XLA kernel ran
    plain = _run_steps(cls(fused_update=False, **kwargs), _random_grads, _INIT, 4)
    # TFKTOPIC_XLA_LOOPS=0 (the rest of the suite) runs the unfused graph, same results.
    monkeypatch.setenv("TFKTOPIC_XLA_LOOPS", "0")
    switched_off = cls(**kwargs)
    np.testing.assert_array_equal(_run_steps(switched_off, _random_grads, _INIT, 4)[-1][0],
                                  plain[-1][0])
    assert switched_off._fused_step is None
    for a_t, b_t in zip(fused, plain):
        for a, b in zip(a_t, b_t):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    moved = max(np.abs(a - b).max() for a, b in zip(fused[-1], _INIT))
    assert moved > 1e-2


# --------------------------------------------------------------------------
# 3. Noise statistics on a zero-gradient problem
# --------------------------------------------------------------------------
SHAPE = (400, 250)  # 1e5 coordinates: variance estimated to ~0.5 %


def _zero_grad_increments(optimizer, steps):
    w = keras.Variable(np.zeros(SHAPE, "float32"))
    optimizer.build([w])
    zero = tf.zeros(SHAPE)
    previous, increments = np.asarray(w), []
    for _ in range(steps):
        optimizer.apply_gradients([(zero, w)])
        current = np.asarray(w)
        increments.append(current - previous)
        previous = current
    return increments


@pytest.mark.parametrize("temperature", [1.0, 0.25])
def test_sgld_noise_variance_is_two_lr_t_over_n(temperature):
    lr, n = 0.3, 1000
    incs = _zero_grad_increments(
        SGLD(learning_rate=lr, num_examples=n, temperature=temperature,
             prior_precision=0.0, seed=5), 3)
    expected = 2 * lr * temperature / n  # = ε·T with ε = 2η/N
    for inc in incs:
        assert abs(inc.mean()) < 4 * np.sqrt(expected / inc.size)
        np.testing.assert_allclose(inc.var(), expected, rtol=0.02)
    # Independent across steps.
    assert abs(np.corrcoef(incs[0].ravel(), incs[1].ravel())[0, 1]) < 0.02


def test_psgld_noise_variance_is_preconditioned():
    lr, n, rho, eps, temperature = 1e-3, 500, 0.9, 1e-3, 1.0
    incs = _zero_grad_increments(
        PSGLD(learning_rate=lr, num_examples=n, temperature=temperature, rho=rho,
              epsilon=eps, prior_precision=0.0, v_init="ones", seed=5), 4)
    for t, inc in enumerate(incs, start=1):
        v = rho**t  # V_t with V_0 = 1 and zero gradients
        g_inv = 1.0 / (eps + np.sqrt(v))
        np.testing.assert_allclose(inc.var(), 2 * lr * temperature * g_inv / n, rtol=0.02)


def test_noise_burnin_steps_delays_noise():
    incs = _zero_grad_increments(
        SGLD(learning_rate=0.1, num_examples=10, prior_precision=0.0,
             noise_burnin_steps=2, seed=1), 3)
    assert np.all(incs[0] == 0) and np.all(incs[1] == 0)
    np.testing.assert_allclose(incs[2].var(), 2 * 0.1 / 10, rtol=0.02)


def test_sparse_embedding_gradients_perturb_every_row():
    model = keras.Sequential([keras.Input((3,), dtype="int32"),
                              keras.layers.Embedding(20, 4),
                              keras.layers.GlobalAveragePooling1D(),
                              keras.layers.Dense(1)])
    before = model.get_weights()[0].copy()
    model.compile(optimizer=PSGLD(learning_rate=1e-3, num_examples=8, seed=0), loss="mse")
    model.fit(np.zeros((8, 3), "int32"), np.ones((8, 1), "float32"), verbose=0)
    changed = np.any(model.get_weights()[0] != before, axis=1)
    assert changed.all()  # rows 1..19 never appear in the batch


# --------------------------------------------------------------------------
# 4. Determinism and resumption
# --------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [SGLD, PSGLD])
def test_same_seed_same_trajectory_different_seed_differs(cls):
    def traj(seed):
        return _run_steps(cls(learning_rate=1e-2, num_examples=20, seed=seed),
                          _random_grads, _INIT, 3)

    a, b, c = traj(1), traj(1), traj(2)
    for ta, tb, tc in zip(a, b, c):
        for x, y, z in zip(ta, tb, tc):
            np.testing.assert_array_equal(x, y)
            assert not np.allclose(x, z)


def test_default_seed_follows_keras_set_random_seed():
    keras.utils.set_random_seed(123)
    s1 = SGLD(num_examples=10).seed
    keras.utils.set_random_seed(123)
    assert SGLD(num_examples=10).seed == s1


@pytest.mark.parametrize("cls", [SGLD, PSGLD])
def test_resuming_from_optimizer_state_reproduces_next_steps(cls):
    kwargs = dict(learning_rate=1e-2, num_examples=20, seed=4)
    full = _run_steps(cls(**kwargs), _random_grads, _INIT, 6)

    first = cls(**kwargs)
    variables = [keras.Variable(v) for v in _INIT]
    first.build(variables)
    for t in range(3):
        grads = _random_grads(t, [np.asarray(v) for v in variables])
        first.apply_gradients(zip([tf.constant(g) for g in grads], variables))
    state = [np.asarray(v) for v in first.variables]
    weights = [np.asarray(v) for v in variables]

    resumed = cls.from_config(first.get_config())
    variables = [keras.Variable(w) for w in weights]
    resumed.build(variables)
    resumed.set_weights(state)
    assert int(np.asarray(resumed.iterations)) == 3
    for t in range(3, 6):
        grads = _random_grads(t, [np.asarray(v) for v in variables])
        resumed.apply_gradients(zip([tf.constant(g) for g in grads], variables))
        for got, want in zip(variables, full[t]):
            np.testing.assert_array_equal(np.asarray(got), want)


# --------------------------------------------------------------------------
# 5. Serialisation, .keras round trip, XLA
# --------------------------------------------------------------------------
def test_get_config_round_trip_with_schedule():
    opt = PSGLD(learning_rate=_schedule(), num_examples=123, temperature=0.5,
                prior_precision=2.0, rho=0.95, epsilon=1e-6, epsilon_placement="inside",
                v_init="first_gradient", noise_burnin_steps=7, seed=9, global_clipnorm=5.0,
                v_floor=1e-8, sparse_v="hold", fused_update=False)
    config = opt.get_config()
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert isinstance(clone, PSGLD)
    assert clone.get_config() == config
    assert isinstance(clone._learning_rate, keras.optimizers.schedules.ExponentialDecay)
    sgld = SGLD(learning_rate=0.5, num_examples=7, seed=2, clipvalue=1.0)
    assert SGLD.from_config(sgld.get_config()).get_config() == sgld.get_config()


def test_keras_file_round_trip_continues_identically(tmp_path):
    x, y = _regression_data()

    def compiled():
        model = _dense_model()
        model.compile(optimizer=PSGLD(learning_rate=1e-2, num_examples=32, seed=21,
                                      v_init="first_gradient"), loss="mse")
        return model

    straight = compiled()
    straight.fit(x, y, batch_size=8, epochs=4, shuffle=False, verbose=0)

    first = compiled()
    first.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    path = tmp_path / "psgld.keras"
    first.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded.optimizer, PSGLD)
    assert loaded.optimizer.get_config() == first.optimizer.get_config()
    assert int(np.asarray(loaded.optimizer.iterations)) == 8
    for a, b in zip(loaded.optimizer.variables, first.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    loaded.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(loaded.get_weights(), straight.get_weights()):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("cls", [SGLD, PSGLD])
def test_xla_and_eager_graph_agree(cls):
    kwargs = dict(learning_rate=1e-2, num_examples=32, seed=8, global_clipnorm=1.0)
    if cls is PSGLD:
        # With V1 = g1*g1 the first step is lr*sign(g): XLA's last-bit rounding
        # differences then grow past 1e-5; V0 = 1 isolates the noise check.
        kwargs["v_init"] = "ones"
    plain = _fit_weights(cls(**kwargs), epochs=2, jit_compile=False)
    xla = _fit_weights(cls(**kwargs), epochs=2, jit_compile=True)
    for a, b in zip(plain, xla):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------
# 6. Bad arguments
# --------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [SGLD, PSGLD])
@pytest.mark.parametrize("kwargs, name", [
    (dict(learning_rate=-0.1, num_examples=10), "learning_rate"),
    (dict(learning_rate=0.0, num_examples=10), "learning_rate"),
    (dict(learning_rate="fast", num_examples=10), "learning_rate"),
    (dict(temperature=-1.0, num_examples=10), "temperature"),
    (dict(num_examples=0), "num_examples"),
    (dict(num_examples=0.5), "num_examples"),
    (dict(), "num_examples"),
    (dict(num_examples=10, prior_precision=-1.0), "prior_precision"),
    (dict(num_examples=10, noise_burnin_steps=-3), "noise_burnin_steps"),
    (dict(num_examples=10, seed=1.5), "seed"),
])
def test_bad_arguments_raise_value_error_naming_them(cls, kwargs, name):
    with pytest.raises(ValueError, match=name):
        cls(**kwargs)


@pytest.mark.parametrize("kwargs, name", [
    (dict(rho=1.0), "rho"),
    (dict(epsilon=0.0), "epsilon"),
    (dict(epsilon_placement="middle"), "epsilon_placement"),
    (dict(v_init="random"), "v_init"),
    (dict(v_floor=-1.0), "v_floor"),
    (dict(sparse_v="lazy"), "sparse_v"),
    (dict(fused_update="yes"), "fused_update"),
])
def test_psgld_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        PSGLD(num_examples=10, **kwargs)


def test_integer_learning_rate_is_accepted():
    assert SGLD(learning_rate=1, num_examples=10).get_config()["learning_rate"] == 1.0


# --------------------------------------------------------------------------
# 7. MirroredStrategy on 2 logical CPUs (subprocess: devices must be set first)
# --------------------------------------------------------------------------
_MIRRORED_SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from tfktopic.bayes import PSGLD, SGLD

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5)).astype("float32")
    y = rng.normal(size=(64, 2)).astype("float32")
    init = None

    def run(cls, strategy):
        global init
        with strategy.scope():
            model = keras.Sequential([keras.Input((5,)),
                                      keras.layers.Dense(6, activation="tanh"),
                                      keras.layers.Dense(2)])
            if init is None:
                init = model.get_weights()
            model.set_weights(init)
            # pSGLD with v_floor: without it, a coordinate whose first gradient is ~0
            # takes a sign-like step g / |g|, so a last-bit difference of the summed
            # replica gradients (TF's reductions split work by the threads available)
            # can flip it -- measured: 0.002 apart once on a loaded CI machine.
            extra = {"v_floor": 1e-4} if cls is PSGLD else {}
            model.compile(optimizer=cls(learning_rate=0.05, num_examples=64,
                                        temperature=1.0, seed=17, **extra), loss="mse")
        model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
        replica_gap = 0.0
        for w in model.weights:
            local = strategy.experimental_local_results(w.value)
            for other in local[1:]:
                replica_gap = max(replica_gap,
                                  float(np.abs(np.asarray(local[0]) - np.asarray(other)).max()))
        return model.get_weights(), strategy.num_replicas_in_sync, replica_gap

    out = {}
    for cls in (SGLD, PSGLD):
        single, _, _ = run(cls, tf.distribute.get_strategy())
        mirrored, replicas, gap = run(cls, tf.distribute.MirroredStrategy(
            ["/cpu:0", "/cpu:1"]))
        moved = max(float(np.abs(a - b).max()) for a, b in zip(single, init))
        diff = max(float(np.abs(a - b).max()) for a, b in zip(single, mirrored))
        out[cls.__name__] = dict(replicas=replicas, diff=diff, gap=gap, moved=moved)
    print("RESULT" + json.dumps(out))
""")


def test_mirrored_strategy_matches_single_device(tmp_path):
    script = tmp_path / "mirrored.py"
    script.write_text(_MIRRORED_SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    result = json.loads(line[len("RESULT"):])
    for name, r in result.items():
        assert r["replicas"] == 2, (name, r)
        assert r["moved"] > 1e-3, (name, r)  # the noise actually did something
        assert r["gap"] == 0.0, (name, r)    # mirrored copies stay bit-identical
        # 2 replicas == 1 device, noise included. Summing the replicas'
        # gradients changes float32 rounding; pSGLD's preconditioner (at most
        # 1/sqrt(v_floor) = 100 here) amplifies it to ~1e-5 of a movement of ~1.
        assert r["diff"] < 1e-4, (name, r)


def test_first_gradient_init_fills_coordinates_without_gradient():
    """Rows absent from the first batch get the mean square, not V = 0 (G = 1/λ)."""
    var = keras.Variable(np.zeros(4, "float32"))
    opt = PSGLD(learning_rate=1e-3, num_examples=10, temperature=0.0)
    opt.apply_gradients([(np.array([2.0, 0.0, 0.0, 1.0], "float32"), var)])
    np.testing.assert_allclose(np.asarray(opt._sq_averages[0]), [4.0, 2.5, 2.5, 1.0])
    single = keras.Variable(np.zeros(3, "float32"))      # one non-zero gradient: its square
    opt = PSGLD(learning_rate=1e-3, num_examples=10, temperature=0.0)
    opt.apply_gradients([(np.array([0.0, 3.0, 0.0], "float32"), single)])
    np.testing.assert_allclose(np.asarray(opt._sq_averages[0]), [9.0, 9.0, 9.0])
    silent = keras.Variable(np.zeros(3, "float32"))
    opt = PSGLD(learning_rate=1e-3, num_examples=10, temperature=0.0)
    opt.apply_gradients([(np.zeros(3, "float32"), silent)])
    np.testing.assert_allclose(np.asarray(opt._sq_averages[0]), [1.0, 1.0, 1.0])


@pytest.mark.parametrize("cls", [SGLD, PSGLD])
@tensorflow_only
def test_normalize_gradients_to_rescales_every_step(cls):
    """The authors' "clipping": the global norm is set to c, small gradients grow too."""
    opt = cls(learning_rate=0.1, num_examples=10, temperature=0.0, prior_precision=0.0,
              normalize_gradients_to=5.0)
    for g in ([[0.3, 0.4]], [[30.0, 40.0]]):
        grads = opt._clip_gradients([tf.constant(g), None,
                                     tf.IndexedSlices(tf.constant([[0.0, 0.0]]),
                                                      tf.constant([0]), tf.constant([3, 2]))])
        assert grads[1] is None
        np.testing.assert_allclose(np.asarray(grads[0]), [[3.0, 4.0]], rtol=1e-6)
    if cls is SGLD:  # one SGD step (T = 0), gradient norm 0.5: moves by lr·5 in norm
        var = keras.Variable(np.zeros((1, 2), "float32"))
        opt.apply_gradients([(tf.constant([[0.3, 0.4]]), var)])
        np.testing.assert_allclose(np.linalg.norm(np.asarray(var)), 0.5, rtol=1e-6)
    # A sparse gradient alone (norm 1) is scaled up to 5 as well.
    sparse = opt._clip_gradients([tf.IndexedSlices(tf.constant([[0.6, 0.8]]), tf.constant([1]),
                                                   tf.constant([3, 2]))])[0]
    np.testing.assert_allclose(np.asarray(sparse.values), [[3.0, 4.0]], rtol=1e-6)
    with pytest.raises(ValueError, match="normalize_gradients_to"):
        cls(num_examples=10, normalize_gradients_to=0.0)
    # The smallest valid settings: any positive target, a single example.
    small = cls(num_examples=1, normalize_gradients_to=0.5)
    assert (small.num_examples, small.normalize_gradients_to) == (1, 0.5)
