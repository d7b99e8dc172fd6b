"""pSGLD compiled by XLA with its DEFAULT v_init="first_gradient" (issue 17).

tests/test_sgmcmc.py compares XLA with eager/graph runs using v_init="ones"; this
checks the default path under XLA against a closed form: on the first step the
squared-gradient average V is g1 * g1 (the gradient at the initial weights,
computed here by a tape), and the first move is -lr g1 / (|g1| + eps) plus noise of
variance 2 lr / (N (|g1| + eps)) -- the noise is switched off (temperature 0) for
the value check and then checked on its own.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

from tfktopic.bayes import PSGLD

LR, N, EPS = 1e-2, 32, 1e-5


def _model():
    rng = np.random.default_rng(0)
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(48, activation="tanh"),
                              keras.layers.Dense(8)])
    model.set_weights([rng.normal(scale=0.5, size=w.shape).astype("float32")
                       for w in model.get_weights()])
    return model


def _data():
    rng = np.random.default_rng(1)
    return (rng.normal(size=(N, 16)).astype("float32"),
            rng.normal(size=(N, 8)).astype("float32"))


def _first_gradient(x, y):
    model = _model()
    with tf.GradientTape() as tape:
        loss = keras.losses.mean_squared_error(y, model(x))
        loss = tf.reduce_mean(loss)
    return [g.numpy().astype(np.float64) for g in tape.gradient(loss, model.trainable_weights)]


def _one_step(jit_compile, temperature, seed=8):
    x, y = _data()
    model = _model()
    initial = [w.astype(np.float64) for w in model.get_weights()]
    optimizer = PSGLD(LR, num_examples=N, temperature=temperature, prior_precision=0.0,
                      epsilon=EPS, seed=seed)
    assert optimizer.v_init == "first_gradient"          # the default
    model.compile(optimizer=optimizer, loss="mse", jit_compile=jit_compile)
    model.train_on_batch(x, y)
    moved = [w - w0 for w, w0 in zip(model.get_weights(), initial)]
    slots = [np.asarray(v, np.float64) for v in optimizer.variables
             if "sq_average" in v.path]
    return moved, slots


@pytest.mark.parametrize("jit_compile", [True, False])
def test_first_step_of_default_psgld_is_the_closed_form(jit_compile):
    x, y = _data()
    gradients = _first_gradient(x, y)
    moved, slots = _one_step(jit_compile, temperature=0.0)
    assert len(slots) == len(gradients)
    for g, v, step in zip(gradients, slots, moved):
        np.testing.assert_allclose(v, g * g, rtol=2e-3, atol=1e-10)   # float32 gradients
        np.testing.assert_allclose(step, -LR * g / (np.abs(g) + EPS), rtol=1e-3, atol=1e-7)


def test_default_psgld_noise_under_xla_has_the_preconditioned_variance():
    """Under XLA, the first step's noise (the move minus the drift) has variance
    2 lr / (N (|g1| + eps)) per weight (temperature 1), pooled over the weights
    and 20 seeds as standardised values ~ N(0, 1)."""
    x, y = _data()
    gradients = _first_gradient(x, y)
    drift = [-LR * g / (np.abs(g) + EPS) for g in gradients]
    scale = [np.sqrt(2 * LR / (N * (np.abs(g) + EPS))) for g in gradients]
    z = []
    for seed in range(2):
        moved, _ = _one_step(True, temperature=1.0, seed=seed)
        z.extend(((m - d) / s).ravel() for m, d, s in zip(moved, drift, scale))
    z = np.concatenate(z)
    # 2,416 values: standard errors ~0.02 (mean) and ~0.03 (variance).
    assert abs(z.mean()) < 0.12 and abs(z.var() - 1.0) < 0.15, (z.mean(), z.var())
