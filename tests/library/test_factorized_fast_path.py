"""FactorizedTopicLSTM's fast path (factorized_recurrence) equals the while-loop reference:
values and gradients of every weight, the inputs, the topic proportions and the initial
state; jit and not; inside tf.function for varying batch sizes; fallbacks; TCNLM's step."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from tfktopic.models.tcnlm import factorized_lstm
from tfktopic.models.tcnlm.factorized_lstm import FactorizedTopicLSTM
from tfktopic.models.tcnlm.factorized_recurrence import factorized_recurrence
from tfktopic.models.tcnlm.model import TCNLM

#: The compiled (XLA) loops are what these tests check (conftest turns XLA off elsewhere).
pytestmark = pytest.mark.usefixtures("xla_loops_on")

UNITS, TOPICS, FACTORS, DIM = 6, 3, 5, 4


def _pair(jit_compile=True, **kwargs):
    """A fast-path layer and a reference (while-loop) layer holding the same weights,
    every weight drawn independently (W_b and U_b, W_c and U_c... all differ)."""
    layers = [FactorizedTopicLSTM(UNITS, TOPICS, factor_dim=FACTORS, fast_path=fast,
                                  jit_compile=jit_compile, **kwargs) for fast in (True, False)]
    for layer in layers:
        layer.build((None, None, DIM), (None, TOPICS))
    rng = np.random.default_rng(0)
    weights = [rng.normal(scale=0.5, size=w.shape).astype(np.float32) for w in layers[1].weights]
    for layer in layers:
        layer.set_weights(weights)
    cell = layers[0].cell
    assert not np.allclose(cell.input_topic_kernel.numpy(), cell.recurrent_topic_kernel.numpy())
    return layers


def _inputs(rows, steps=7, seed=1):
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=(rows, steps, DIM)), tf.float32)
    t = tf.constant(rng.dirichlet(np.ones(TOPICS), size=rows), tf.float32)
    h_0, c_0 = (tf.constant(rng.normal(size=(rows, UNITS)), tf.float32) for _ in range(2))
    return x, t, h_0, c_0


def _assert_close(fast, reference, check_nonzero=True):
    for got, expected in zip(fast, reference):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
        if check_nonzero:
            assert np.abs(expected.numpy()).max() > 1e-3


@pytest.mark.parametrize("jit_compile", [True, False])
def test_values_and_gradients_of_everything_equal_the_while_loop(jit_compile):
    fast, reference = _pair(jit_compile=jit_compile, return_state=True)
    x, t, h_0, c_0 = _inputs(3)
    rng = np.random.default_rng(2)
    # A random weight per output element: each of outputs, h_L and c_L gets its own gradient.
    probes = [tf.constant(rng.normal(size=s), tf.float32)
              for s in ((3, 7, UNITS), (3, UNITS), (3, UNITS))]
    assert fast.takes_fast_path() and not reference.takes_fast_path()

    def run(layer):
        with tf.GradientTape() as tape:
            tape.watch([x, t, h_0, c_0])
            outputs = layer(x, t, initial_state=[h_0, c_0], training=True)
            loss = sum(tf.reduce_sum(tf.sin(o) * p) for o, p in zip(outputs, probes))
        return outputs, tape.gradient(loss, [x, t, h_0, c_0] + layer.trainable_weights)

    fast_out, fast_grads = run(fast)
    ref_out, ref_grads = run(reference)
    assert len(fast_grads) == 4 + 7    # x, t, h_0, c_0 and W_c, W_b, W_a, U_c, U_b, U_a, bias
    _assert_close(fast_out, ref_out)
    _assert_close(fast_grads, ref_grads)


def test_from_zero_state_and_the_last_cell_state_alone():
    """No initial state; then d c_L alone (outputs unused) reaches every weight."""
    fast, reference = _pair(return_state=True)
    x, t, _, _ = _inputs(2, steps=5, seed=3)
    _assert_close(fast(x, t), reference(x, t))

    def grads(layer):
        with tf.GradientTape() as tape:
            tape.watch(t)
            loss = tf.reduce_sum(layer(x, t, training=True)[2] ** 2)
        return tape.gradient(loss, [t] + layer.trainable_weights)

    _assert_close(grads(fast), grads(reference))


def test_same_result_inside_tf_function_for_varying_batch_sizes():
    fast, reference = _pair()
    traced = tf.function(lambda x, t: fast(x, t))
    # 9 and 11 rows are padded to the same bucket of 16.
    for rows in (2, 9, 11, 1):
        x, t, _, _ = _inputs(rows, seed=rows)
        _assert_close([traced(x, t)], [reference(x, t)])

    def gradients(layer, x, t):
        @tf.function
        def run(x, t):
            with tf.GradientTape() as tape:
                tape.watch(t)
                loss = tf.reduce_sum(layer(x, t, training=True) ** 2)
            return tape.gradient(loss, [t] + layer.trainable_weights)
        return run(x, t)

    for rows in (3, 10):
        x, t, _, _ = _inputs(rows, seed=10 + rows)
        _assert_close(gradients(fast, x, t), gradients(reference, x, t))
    assert tuple(fast(tf.zeros((0, 5, DIM)), tf.zeros((0, TOPICS))).shape) == (0, 5, UNITS)


def test_fallbacks_equal_the_reference():
    """A mask takes the while loop (masked steps carry the state); `return_sequences=False`
    and `fast_path=False` are covered too."""
    fast, reference = _pair(return_state=True)
    x, t, h_0, c_0 = _inputs(2, steps=5, seed=4)
    mask = tf.constant([[True] * 5, [True] * 3 + [False] * 2])
    assert not fast.takes_fast_path(mask)
    masked = fast(x, t, mask=mask, initial_state=[h_0, c_0])
    _assert_close(masked, reference(x, t, mask=mask, initial_state=[h_0, c_0]))
    np.testing.assert_allclose(masked[0].numpy()[1, 3], masked[0].numpy()[1, 2])
    last_fast, last_ref = (_pair(return_sequences=False)[i] for i in (0, 1))
    _assert_close([last_fast(x, t)], [last_ref(x, t)])
    assert tuple(last_fast(x, t).shape) == (2, UNITS)


def test_recurrence_function_directly_against_autodiff_of_the_same_loop():
    """`factorized_recurrence` with random (not layer-made) inputs equals the reference
    layer's loop written with plain TF ops and differentiated by autodiff."""
    rng = np.random.default_rng(5)
    steps, rows = 4, 3
    args = [tf.constant(rng.normal(scale=0.5, size=s), tf.float32) for s in (
        (steps, 4, rows, UNITS), (4, rows, FACTORS), (4, UNITS, FACTORS), (4, FACTORS, UNITS),
        (rows, UNITS), (rows, UNITS))]

    def autodiff_loop(x, s, u_c, u_a, h, c):
        outputs = []
        for step in range(steps):
            pre = x[step] + tf.matmul(s * tf.matmul(h[None], u_c), u_a)
            c = tf.sigmoid(pre[1]) * c + tf.sigmoid(pre[0]) * tf.tanh(pre[2])   # i, f, c, o
            h = tf.sigmoid(pre[3]) * tf.tanh(c)
            outputs.append(h)
        return tf.stack(outputs), h, c

    def run(function):
        with tf.GradientTape() as tape:
            tape.watch(args)
            outputs, h, c = function(*args)
            loss = tf.reduce_sum(tf.sin(outputs)) + tf.reduce_sum(h * c) + tf.reduce_sum(c)
        return [outputs, h, c] + tape.gradient(loss, args)

    for jit in (True, False):
        _assert_close(run(lambda x, s, u_c, u_a, h, c: factorized_recurrence(
            x, s, u_c, u_a, initial_state=[h, c], jit_compile=jit)), run(autodiff_loop))


def test_config_keeps_the_options_and_old_configs_take_the_fast_path():
    layer = FactorizedTopicLSTM(4, 2, fast_path=False, jit_compile=False)
    clone = FactorizedTopicLSTM.from_config(layer.get_config())
    assert not clone.fast_path and not clone.jit_compile
    old = {k: v for k, v in layer.get_config().items() if k not in ("fast_path", "jit_compile")}
    assert FactorizedTopicLSTM.from_config(old).takes_fast_path()


def test_tcnlm_training_gradients_equal_on_both_paths(monkeypatch):
    """TCNLM's whole objective: the loss and the gradient of every weight are the same with
    the layer's fast path and with the while loop (and TCNLM does take the fast path)."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return factorized_recurrence(*args, **kwargs)

    monkeypatch.setattr(factorized_lstm, "factorized_recurrence", counted)
    rng = np.random.default_rng(6)
    batch = {"tokens": rng.integers(1, 30, (5, 6)).astype("int32"),
             "targets": rng.integers(1, 30, (5, 6)).astype("int32"),
             "mask": (rng.random((5, 6)) > 0.3).astype("float32"),
             "context_bow": rng.integers(0, 3, (5, 12)).astype("float32")}
    keras.utils.set_random_seed(0)
    model = TCNLM(30, 12, num_topics=3, embedding_dim=8, hidden_dim=8, factor_dim=7,
                  ntm_units=(8,), num_layers=2)
    results = []
    for fast in (True, False):
        for rnn in model.rnns:
            rnn.fast_path = fast
        with tf.GradientTape() as tape:
            loss = model.objective(batch, training=False)["loss"]
        results.append([loss] + [tf.convert_to_tensor(g)   # the embedding's IndexedSlices
                                 for g in tape.gradient(loss, model.trainable_weights)])
        assert len(calls) == (2 if fast else 0)     # both layers, on the fast path only
        calls.clear()
    assert all(g is not None for g in results[0])
    _assert_close(results[0], results[1], check_nonzero=False)
