"""HoistedLSTM equals keras.layers.LSTM: values, gradients, fallbacks, saving."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from tfktopic.layers import HoistedLSTM
from tfktopic.layers.hoisted_lstm import hoistable, run_lstm


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
