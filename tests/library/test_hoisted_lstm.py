"""HoistedLSTM equals keras.layers.LSTM: values, gradients, fallbacks, saving."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from tfktopic.layers import HoistedLSTM
from tfktopic.layers.hoisted_lstm import hoistable, run_lstm

#: The compiled (XLA) loops are what these tests check (conftest turns XLA off elsewhere).
pytestmark = pytest.mark.usefixtures("xla_loops_on")


def _pair(units=6, jit_compile=True, **kwargs):
    """A HoistedLSTM and a keras LSTM holding the same weights."""
    keras.utils.set_random_seed(1)
    fast = HoistedLSTM(units, return_sequences=True, jit_compile=jit_compile, **kwargs)
    plain = keras.layers.LSTM(units, return_sequences=True, **kwargs)
    fast.build((None, None, 4))
    plain.build((None, None, 4))
    # Non-trivial weights: the bias too, so its gate layout is checked.
    rng = np.random.default_rng(0)
    weights = [rng.normal(scale=0.5, size=w.shape).astype(np.float32) for w in plain.weights]
    plain.set_weights(weights)
    fast.set_weights(weights)
    return fast, plain


@pytest.mark.parametrize("jit_compile", [True, False])
def test_path_is_taken_and_equals_keras_lstm_values_and_gradients(jit_compile):
    fast, plain = _pair(jit_compile=jit_compile)
    x = tf.constant(np.random.default_rng(1).normal(size=(3, 9, 4)), tf.float32)
    assert hoistable(fast, training=True)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y_fast, y_plain = fast(x, training=True), plain(x, training=True)
        loss_fast = tf.reduce_sum(tf.sin(y_fast))
        loss_plain = tf.reduce_sum(tf.sin(y_plain))
    np.testing.assert_allclose(y_fast.numpy(), y_plain.numpy(), atol=1e-6)
    grads_fast = tape.gradient(loss_fast, [x] + fast.trainable_weights)
    grads_plain = tape.gradient(loss_plain, [x] + plain.trainable_weights)
    for g_fast, g_plain in zip(grads_fast, grads_plain):
        np.testing.assert_allclose(g_fast.numpy(), g_plain.numpy(), rtol=1e-5, atol=1e-6)
        assert np.abs(g_plain.numpy()).max() > 1e-3


def test_same_result_inside_tf_function_for_any_batch_size():
    fast, plain = _pair()
    traced = tf.function(lambda t: fast(t))
    # 9 and 11 rows are padded to the same bucket of 16, inside one trace.
    for rows in (2, 9, 11):
        x = tf.constant(np.random.default_rng(rows).normal(size=(rows, 5, 4)), tf.float32)
        np.testing.assert_allclose(traced(x).numpy(), plain(x).numpy(), atol=1e-6)
    x = tf.constant(np.random.default_rng(2).normal(size=(2, 5, 4)), tf.float32)

    def gradients(layer):
        @tf.function
        def run(t):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(layer(t, training=True) ** 2)
            return tape.gradient(loss, layer.trainable_weights)
        return [g.numpy() for g in run(x)]

    for g_fast, g_plain in zip(gradients(fast), gradients(plain)):
        np.testing.assert_allclose(g_fast, g_plain, rtol=1e-5, atol=1e-6)
    assert tuple(fast(tf.zeros((0, 5, 4))).shape) == (0, 5, 6)


@pytest.mark.parametrize("kwargs, call", [
    ({"go_backwards": True}, {}),
    ({"dropout": 0.5, "seed": 7}, {"training": True}),   # same seed: same masks
    ({"recurrent_dropout": 0.5, "seed": 7}, {"training": True}),
    ({"activation": "relu"}, {}),
    ({}, {"mask": np.array([[True] * 3 + [False] * 2] * 2)}),
])
def test_options_it_does_not_cover_fall_back_to_keras(kwargs, call):
    fast, plain = _pair(**kwargs)
    x = tf.constant(np.random.default_rng(3).normal(size=(2, 5, 4)), tf.float32)
    assert not hoistable(fast, mask=call.get("mask"), training=call.get("training", False))
    y_fast, y_plain = fast(x, **call), plain(x, **call)
    np.testing.assert_allclose(y_fast.numpy(), y_plain.numpy(), atol=1e-6)


def test_config_round_trip_and_weights_interchangeable_with_keras_lstm(tmp_path):
    fast, plain = _pair()
    clone = HoistedLSTM.from_config(fast.get_config())
    assert clone.units == 6 and clone.return_sequences and clone.jit_compile
    assert not HoistedLSTM.from_config(_pair(jit_compile=False)[0].get_config()).jit_compile
    inputs = keras.Input((5, 4))
    model = keras.Model(inputs, fast(inputs))
    path = tmp_path / "hoisted.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.layers[-1], HoistedLSTM)
    x = np.random.default_rng(4).normal(size=(2, 5, 4)).astype(np.float32)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), plain(x).numpy(), atol=1e-6)


def test_run_lstm_takes_the_fast_path_for_a_plain_keras_lstm():
    _, plain = _pair()
    x = tf.constant(np.random.default_rng(6).normal(size=(3, 7, 4)), tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        fast_loss = tf.reduce_sum(run_lstm(plain, x, training=True) ** 2)
        plain_loss = tf.reduce_sum(plain(x, training=True) ** 2)
    assert hoistable(plain, training=True)
    np.testing.assert_allclose(fast_loss.numpy(), plain_loss.numpy(), rtol=1e-6)
    for g_fast, g_plain in zip(tape.gradient(fast_loss, plain.trainable_weights),
                               tape.gradient(plain_loss, plain.trainable_weights)):
        np.testing.assert_allclose(g_fast.numpy(), g_plain.numpy(), rtol=1e-5, atol=1e-6)
    # With dropout inside the cell it is the layer's own call.
    _, dropped = _pair(dropout=0.5, seed=3)
    assert not hoistable(dropped, training=True) and hoistable(dropped, training=False)
    np.testing.assert_allclose(run_lstm(dropped, x).numpy(), dropped(x).numpy(), atol=1e-6)


@pytest.mark.parametrize("jit_compile", [True, False])
def test_initial_state_and_return_state_equal_keras_lstm_values_and_gradients(jit_compile):
    """A carried state in, the last state out (`CarriedStateLSTM`): values, and the gradients
    of the weights, the inputs and the initial state, through both outputs."""
    _, plain = _pair(units=6, return_state=True)
    rng = np.random.default_rng(7)
    x = tf.constant(rng.normal(size=(3, 9, 4)), tf.float32)
    h_0, c_0 = (tf.constant(rng.normal(size=(3, 6)), tf.float32) for _ in range(2))
    weights = [tf.constant(rng.normal(size=(1, 9, 6)), tf.float32)] + \
        [tf.constant(rng.normal(size=(1, 6)), tf.float32) for _ in range(2)]
    assert hoistable(plain, [h_0, c_0], training=True)

    def run(call):
        with tf.GradientTape() as tape:
            tape.watch([x, h_0, c_0])
            outputs = call([h_0, c_0])
            loss = sum(tf.reduce_sum(tf.sin(o) * w) for o, w in zip(outputs, weights))
        return outputs, tape.gradient(loss, [x, h_0, c_0] + plain.trainable_weights)

    fast_out, fast_grads = run(lambda s: run_lstm(plain, x, training=True,
                                                   jit_compile=jit_compile, initial_state=s))
    plain_out, plain_grads = run(lambda s: plain(x, initial_state=s, training=True))
    for a, b in zip(fast_out, plain_out):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)
    for g_fast, g_plain in zip(fast_grads, plain_grads):
        np.testing.assert_allclose(g_fast.numpy(), g_plain.numpy(), rtol=1e-5, atol=1e-6)
        assert np.abs(g_plain.numpy()).max() > 1e-3


def test_the_last_cell_state_alone_gets_its_gradient():
    """d c_T alone (h unused) still reaches the weights and c_0 as Keras' does."""
    _, plain = _pair(units=5, return_state=True)
    x = tf.constant(np.random.default_rng(8).normal(size=(2, 4, 4)), tf.float32)
    c_0 = tf.constant(np.random.default_rng(9).normal(size=(2, 5)), tf.float32)
    h_0 = tf.zeros((2, 5))

    def grads(call):
        with tf.GradientTape() as tape:
            tape.watch(c_0)
            loss = tf.reduce_sum(call([h_0, c_0])[2] ** 2)
        return tape.gradient(loss, [c_0] + plain.trainable_weights)

    fast = grads(lambda s: run_lstm(plain, x, training=True, initial_state=s))
    slow = grads(lambda s: plain(x, initial_state=s, training=True))
    for g_fast, g_plain in zip(fast, slow):
        np.testing.assert_allclose(g_fast.numpy(), g_plain.numpy(), rtol=1e-5, atol=1e-6)


def test_use_keras_lstm_switches_every_lstm_of_a_model_to_keras_own_path():
    from tfktopic.layers.hoisted_lstm import use_keras_lstm
    from tfktopic.models import LSTMLanguageModel

    model = LSTMLanguageModel(vocab_size=30, embedding_dim=4, hidden_dim=5, num_layers=2)
    assert all(hoistable(lstm, training=True) for lstm in model.lstms)
    assert use_keras_lstm(model) == 2
    assert not any(hoistable(lstm, training=True) for lstm in model.lstms)
    tokens = np.random.default_rng(5).integers(1, 30, (2, 6))
    keras_path = model(tokens).numpy()
    use_keras_lstm(model, enabled=False)
    np.testing.assert_allclose(model(tokens).numpy(), keras_path, atol=1e-5)
    gru = keras.layers.GRU(3, return_sequences=True)
    gru.build((None, None, 4))
    assert not hoistable(gru)          # only the LSTM recurrence has a fast path


def test_a_stateful_lstm_carries_its_state_across_calls_as_keras_does():
    """Successive minibatches (`LSTMLanguageModel(stateful=True)`, the SG-MCMC PTB setups):
    the fast path starts each call from the layer's state variables and leaves its last
    state there, with the values and gradients of Keras' own stateful path."""
    from tfktopic.layers.hoisted_lstm import use_keras_lstm

    fast, plain = (keras.layers.LSTM(5, return_sequences=True, stateful=True) for _ in "ab")
    use_keras_lstm(plain)
    rng = np.random.default_rng(11)
    batches = [tf.constant(rng.normal(size=(3, 4, 4)), tf.float32) for _ in range(3)]
    for layer in (fast, plain):
        layer.build((3, None, 4))
    weights = [rng.normal(scale=0.5, size=w.shape).astype(np.float32) for w in plain.weights]
    for layer in (fast, plain):
        layer.set_weights(weights)
        layer.reset_state()
    assert hoistable(fast, training=True) and not hoistable(plain, training=True)
    for x in batches:
        with tf.GradientTape(persistent=True) as tape:
            y_fast = run_lstm(fast, x, training=True)
            y_plain = run_lstm(plain, x, training=True)    # Keras' own path
            losses = [tf.reduce_sum(tf.sin(y)) for y in (y_fast, y_plain)]
        np.testing.assert_allclose(y_fast.numpy(), y_plain.numpy(), atol=1e-5)
        for a, b in zip(fast.states, plain.states):
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
        for g_fast, g_plain in zip(tape.gradient(losses[0], fast.trainable_weights),
                                   tape.gradient(losses[1], plain.trainable_weights)):
            np.testing.assert_allclose(g_fast.numpy(), g_plain.numpy(), rtol=1e-4, atol=1e-5)
    assert np.abs(fast.states[0].numpy()).max() > 1e-2     # a state was carried
    fast.reset_state()
    assert not np.any(fast.states[0].numpy())
    with pytest.raises(ValueError, match="stateful LSTM keeps the state of 3 rows"):
        run_lstm(fast, tf.zeros((2, 4, 4)))


def test_the_environment_variable_turns_the_xla_loops_off(monkeypatch):
    from tfktopic.layers.hoisted_lstm import xla_loops

    assert xla_loops() and not xla_loops(jit_compile=False)      # xla_loops_on
    monkeypatch.setenv("TFKTOPIC_XLA_LOOPS", "0")
    assert not xla_loops()
    monkeypatch.delenv("TFKTOPIC_XLA_LOOPS")
    assert xla_loops()                                            # the default: XLA


def test_half_precision_loops_run_without_xla(monkeypatch):
    """XLA's CPU backend has no AMX kernels for bfloat16 products (measured: 62.9 ms
    against 25.9 ms without XLA, `tfktopic.xla`), so a bfloat16 or float16 sequence takes
    the plain loops even when XLA is on; float32 keeps the compiled ones."""
    from tfktopic.layers import hoisted_lstm

    def compiled(*args):
        raise AssertionError("the XLA loops ran")

    monkeypatch.setitem(hoisted_lstm._LSTM, True, compiled)
    weights = [tf.random.normal(s) * 0.1 for s in ((3, 8), (2, 8), (8,))]
    for dtype in ("bfloat16", "float16"):
        out = hoisted_lstm.hoisted_lstm_sequence(tf.cast(tf.random.normal((4, 5, 3)), dtype),
                                                 *weights)
        assert out.dtype == dtype and out.shape == (4, 5, 2)
    with pytest.raises(AssertionError, match="the XLA loops ran"):
        hoisted_lstm.hoisted_lstm_sequence(tf.random.normal((4, 5, 3)), *weights)
    assert not hoisted_lstm.xla_loops(dtype=tf.bfloat16) and hoisted_lstm.xla_loops(dtype="float32")
