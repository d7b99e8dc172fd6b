"""Fast layers against INDEPENDENT numpy references (issue 17).

Every reference here is a plain numpy transcription of the paper's equations
that shares no helper with the package, and every weight gets its own distinct
random values (so a swap of two weights, e.g. W_b <-> U_b, changes the
result). These are the tests `tools/mutate.py` runs against the mutations of
issue 17 (see CONTRIBUTING.md).
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

from tfktopic.layers import HoistedLSTM
from tfktopic.models.tcnlm import FactorizedTopicLSTM, FactorizedTopicLSTMCell
from tfktopic.layers.hoisted_lstm import hoisted_lstm_sequence
from tfktopic.layers.topic_decoder import NeuralTopicModel

#: The compiled (XLA) loops are what these tests check (conftest turns XLA off elsewhere).
pytestmark = pytest.mark.usefixtures("xla_loops_on")


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


# --------------------------------------------------------------------- TCNLM eq. (12)-(15)

def _numpy_tcnlm_sequence(x, t, mask, h0, c0, weights):
    """TCNLM's factorised LSTM over a whole sequence, straight from the paper.

    For gate g in (i, f, c, o) (keras' order) and topic proportions t (TCNLM eq. 12):
        W_g(t) = W_ga^T diag(W_gb^T t) W_gc^T,   U_g(t) = U_ga^T diag(U_gb^T t) U_gc^T
        z_g = W_g(t) x_m + U_g(t) h_{m-1} + b_g                       (eqs. 13-14)
        c_m = sig(z_f) c_{m-1} + sig(z_i) tanh(z_c),  h_m = sig(z_o) tanh(c_m)   (15)
    Masked steps carry (h, c) forward. Explicit matrices, float64, one example
    and one step at a time.
    """
    Wc, Wb, Wa, Uc, Ub, Ua, bias = (np.asarray(w, np.float64) for w in weights)
    batch, length, _ = x.shape
    outputs = np.zeros((batch, length, h0.shape[1]))
    h_last, c_last = np.zeros_like(h0, np.float64), np.zeros_like(c0, np.float64)
    for n in range(batch):
        W = [Wa[g].T @ np.diag(Wb[g].T @ t[n]) @ Wc[g].T for g in range(4)]
        U = [Ua[g].T @ np.diag(Ub[g].T @ t[n]) @ Uc[g].T for g in range(4)]
        h, c = h0[n].astype(np.float64), c0[n].astype(np.float64)
        for m in range(length):
            if mask[n, m]:
                z = [W[g] @ x[n, m] + U[g] @ h + bias[g] for g in range(4)]
                c = _sigmoid(z[1]) * c + _sigmoid(z[0]) * np.tanh(z[2])
                h = _sigmoid(z[3]) * np.tanh(c)
            outputs[n, m] = h
        h_last[n], c_last[n] = h, c
    return outputs, h_last, c_last


def _distinct_tcnlm_weights(cell, rng):
    """Give every weight of `cell` its own random values (all different)."""
    weights = [cell.input_factor_kernel, cell.input_topic_kernel, cell.input_output_kernel,
               cell.recurrent_factor_kernel, cell.recurrent_topic_kernel,
               cell.recurrent_output_kernel, cell.bias]
    values = []
    for variable in weights:
        value = rng.normal(scale=0.6, size=tuple(variable.shape)).astype(np.float32)
        variable.assign(value)
        values.append(value)
    return values


@pytest.mark.parametrize("masked", [True, False], ids=["masked-while-loop", "fast-path"])
def test_tcnlm_fast_layer_equals_numpy_eq_12_over_a_sequence(masked):
    """Both paths of the sequence layer against numpy: with a mask the while loop, without
    one (on a CPU) the XLA-compiled `factorized_recurrence` with its own gate arithmetic."""
    B, L, n_x, n_h, n_f, K = 3, 8, 5, 6, 4, 3
    layer = FactorizedTopicLSTM(n_h, K, factor_dim=n_f, return_state=True)
    layer.build((B, L, n_x), (B, K))
    rng = np.random.default_rng(17)
    weights = _distinct_tcnlm_weights(layer.cell, rng)
    # Same shapes, different values: a W <-> U or W_b <-> U_b swap changes the function.
    assert not np.allclose(weights[1], weights[4])
    x = rng.normal(size=(B, L, n_x)).astype(np.float32)
    t = rng.dirichlet(np.ones(K), size=B).astype(np.float32)
    h0 = rng.normal(scale=0.5, size=(B, n_h)).astype(np.float32)
    c0 = rng.normal(scale=0.5, size=(B, n_h)).astype(np.float32)
    mask = np.ones((B, L), bool)
    if masked:
        mask[1, 5:] = False            # right padding
        mask[2, 3] = False             # a hole: the state is carried over it
    assert layer.takes_fast_path(mask if masked else None) == (not masked)
    outputs, h_last, c_last = layer(x, t, mask=mask if masked else None,
                                    initial_state=[h0, c0])
    expected, h_ref, c_ref = _numpy_tcnlm_sequence(x, t, mask, h0, c0, weights)
    np.testing.assert_allclose(np.asarray(outputs), expected, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(h_last), h_ref, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(c_last), c_ref, rtol=1e-4, atol=2e-5)
    # The outputs are far from saturation/zero, so the comparison is informative.
    assert 0.05 < np.abs(expected).mean() < 0.9


def test_tcnlm_cell_steps_equal_numpy_eq_12():
    """The step-by-step cell against the same numpy reference (zero start state)."""
    B, L, n_x, n_h, n_f, K = 2, 5, 4, 5, 3, 4
    cell = FactorizedTopicLSTMCell(n_h, K, factor_dim=n_f)
    cell.build((None, n_x + K))
    rng = np.random.default_rng(23)
    weights = _distinct_tcnlm_weights(cell, rng)
    x = rng.normal(size=(B, L, n_x)).astype(np.float32)
    t = rng.dirichlet(np.ones(K), size=B).astype(np.float32)
    tiled = np.concatenate([x, np.repeat(t[:, None], L, 1)], -1)
    got = np.asarray(keras.layers.RNN(cell, return_sequences=True)(tiled))
    zeros = np.zeros((B, n_h), np.float32)
    expected, _, _ = _numpy_tcnlm_sequence(x, t, np.ones((B, L), bool), zeros, zeros, weights)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=2e-5)


def test_tcnlm_preactivations_are_the_topic_mixture_of_eqs_9_to_11():
    """Eqs. (9)-(11): W(t) = sum_k t_k W[k], so z(t) - b = sum_k t_k (z(e_k) - b).

    Checked on the cell's own outputs (not numpy against numpy): a t-dependence
    other than the linear mixture (e.g. a normalisation of W_b t) fails it.
    """
    n_x, n_h, n_f, K, B = 5, 6, 4, 3, 4
    cell = FactorizedTopicLSTMCell(n_h, K, factor_dim=n_f)
    cell.build((None, n_x + K))
    rng = np.random.default_rng(5)
    bias = _distinct_tcnlm_weights(cell, rng)[-1].astype(np.float64)
    x = rng.normal(size=(B, n_x)).astype(np.float32)
    h = rng.normal(size=(B, n_h)).astype(np.float32)
    t = rng.dirichlet(np.ones(K), size=B).astype(np.float32) * 1.7   # off the simplex too
    got = np.asarray(cell.gate_preactivations(x, h, t), np.float64) - bias[:, None]
    mixture = sum(t[None, :, k, None] * (np.asarray(cell.gate_preactivations(
        x, h, np.tile(np.eye(K, dtype=np.float32)[k], (B, 1))), np.float64) - bias[:, None])
        for k in range(K))
    np.testing.assert_allclose(got, mixture, rtol=1e-4, atol=1e-5)
    assert np.abs(got).max() > 0.1


# ---------------------------------------------------------------------------- HoistedLSTM

def _numpy_lstm(x, kernel, recurrent_kernel, bias):
    """The standard LSTM (Keras gate layout i, f, c, o) from zero state, float64.

    Returns h of every step, [N, T, H].
    """
    n, steps, _ = x.shape
    units = recurrent_kernel.shape[0]
    h, c = np.zeros((n, units)), np.zeros((n, units))
    out = np.zeros((n, steps, units))
    for step in range(steps):
        z = x[:, step] @ kernel + h @ recurrent_kernel + bias
        i, f = _sigmoid(z[:, :units]), _sigmoid(z[:, units:2 * units])
        g, o = np.tanh(z[:, 2 * units:3 * units]), _sigmoid(z[:, 3 * units:])
        c = f * c + i * g
        h = o * np.tanh(c)
        out[:, step] = h
    return out


def _numerical_gradient(f, value, eps=1e-6):
    grad = np.zeros_like(value)
    for index in np.ndindex(value.shape):
        up, down = value.copy(), value.copy()
        up[index] += eps
        down[index] -= eps
        grad[index] = (f(up) - f(down)) / (2 * eps)
    return grad


@pytest.mark.parametrize("jit_compile", [True, False])
def test_hoisted_lstm_values_and_gradients_equal_a_numpy_lstm(jit_compile):
    """Values and all four gradients (x, W, U, b) over a 7-step sequence, where
    the cell state and its gradient dc are carried through every step, against a
    numpy forward pass and central finite differences of it (float64)."""
    N, T, D, H = 2, 7, 3, 4
    rng = np.random.default_rng(7)
    x = rng.normal(size=(N, T, D))
    kernel = rng.normal(scale=0.7, size=(D, 4 * H))
    recurrent = rng.normal(scale=0.7, size=(H, 4 * H))
    bias = rng.normal(scale=0.7, size=(4 * H,))
    weight_out = rng.normal(size=(N, T, H))   # loss = sum(R * h): every h_t matters

    def loss(x_, kernel_, recurrent_, bias_):
        return float((weight_out * _numpy_lstm(x_, kernel_, recurrent_, bias_)).sum())

    args = [tf.constant(a, tf.float64) for a in (x, kernel, recurrent, bias)]
    with tf.GradientTape() as tape:
        tape.watch(args)
        hidden = hoisted_lstm_sequence(*args, jit_compile=jit_compile)
        value = tf.reduce_sum(weight_out * hidden)
    got = tape.gradient(value, args)
    np.testing.assert_allclose(hidden.numpy(), _numpy_lstm(x, kernel, recurrent, bias),
                               rtol=1e-10, atol=1e-12)
    values = [x, kernel, recurrent, bias]
    for position, name in enumerate(("x", "kernel", "recurrent_kernel", "bias")):
        def partial(v, position=position):
            return loss(*(v if i == position else a for i, a in enumerate(values)))
        numeric = _numerical_gradient(partial, values[position])
        np.testing.assert_allclose(got[position].numpy(), numeric, rtol=1e-5, atol=1e-7,
                                   err_msg=name)
        assert np.abs(numeric).max() > 1e-2


def test_hoisted_lstm_layer_equals_numpy_lstm_with_keras_weights():
    """The layer (float32, its own Keras weights) against the numpy LSTM."""
    layer = HoistedLSTM(5, return_sequences=True)
    layer.build((None, None, 3))
    rng = np.random.default_rng(11)
    weights = [rng.normal(scale=0.6, size=w.shape).astype(np.float32) for w in layer.weights]
    layer.set_weights(weights)
    x = rng.normal(size=(3, 9, 3)).astype(np.float32)
    expected = _numpy_lstm(x.astype(np.float64), *(w.astype(np.float64) for w in weights))
    np.testing.assert_allclose(np.asarray(layer(x)), expected, rtol=1e-4, atol=1e-5)


# -------------------------------------------------------------------- NTM KL: closed form + MC

def test_ntm_kl_is_the_gaussian_closed_form_and_matches_monte_carlo():
    """KL(q(theta|d) || N(0, I)) of TCNLM eq. (17): the layer's value equals the
    closed form 1/2 sum (mu^2 + s^2 - 1 - 2 log s) of its own (mu, log s) and a
    Monte Carlo estimate E_q[log q - log p] from its own reparameterised draws."""
    keras.utils.set_random_seed(0)
    K, V, B = 4, 9, 3
    ntm = NeuralTopicModel(num_topics=K, vocab_size=V, hidden_units=(8,), seed=2)
    rng = np.random.default_rng(3)
    bow = rng.poisson(2.0, size=(B, V)).astype(np.float32)
    ntm.build(bow.shape)
    for variable in ntm.encoder.weights:   # a posterior far from the prior
        variable.assign(rng.normal(scale=0.8, size=tuple(variable.shape)).astype(np.float32))
    _, kl, _ = ntm(bow, training=False)
    _, mean, log_std = ntm.encoder(bow, training=False)
    mu, log_s = np.asarray(mean, np.float64), np.asarray(log_std, np.float64)
    closed = 0.5 * (mu ** 2 + np.exp(2 * log_s) - 1.0 - 2.0 * log_s).sum(-1)
    np.testing.assert_allclose(np.asarray(kl), closed, rtol=1e-5)
    assert closed.min() > 0.5
    # Monte Carlo with the encoder's own draws: theta = mu + s * eps.
    S = 4000
    repeated = np.repeat(bow, 100, 0)
    draws = np.stack([np.asarray(ntm.encoder(repeated, training=True)[0], np.float64)
                      .reshape(B, 100, K) for _ in range(S // 100)], 0)   # [S/100, B, 100, K]
    draws = draws.transpose(1, 0, 2, 3).reshape(B, S, K)
    s = np.exp(log_s)[:, None]
    log_q = (-0.5 * ((draws - mu[:, None]) / s) ** 2 - np.log(s)).sum(-1)
    log_p = (-0.5 * draws ** 2).sum(-1)
    sample_kl = log_q - log_p
    monte_carlo = sample_kl.mean(1)
    standard_error = sample_kl.std(1) / np.sqrt(S)
    assert (np.abs(monte_carlo - closed) < 4 * standard_error + 1e-3).all(), (
        monte_carlo, closed, standard_error)
    # The draws have the posterior's moments (the reparameterisation is right).
    np.testing.assert_allclose(draws.mean(1), mu, atol=5 * s.max() / np.sqrt(S) + 1e-3)
    np.testing.assert_allclose(draws.std(1), np.exp(log_s), rtol=0.08)
