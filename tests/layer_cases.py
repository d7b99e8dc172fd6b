"""Backend-neutral cases of tfktopic.layers for tests/test_layers_backends.py.

Each case builds one layer, sets every trainable weight from a seeded numpy
generator (the same values on every backend: same build order and shapes),
runs it on numpy inputs and returns its outputs and the gradients of a fixed
scalar function of them (sum of outputs times fixed sinusoid weights) with
respect to the float inputs and the trainable weights, computed with the
running backend's own autodiff (`tf.GradientTape` / `jax.grad`).
"""

import keras
import numpy as np
from keras import ops

from tfktopic.models.tcnlm.factorized_lstm import FactorizedTopicLSTM, TopicExpertsLSTM
from tfktopic.layers.hoisted_lstm import run_lstm
from tfktopic.models.topicrnn.stopword_gate import StopwordGate
from tfktopic.layers.topic_decoder import TopicDecoder
from tfktopic.layers.topic_encoders import GaussianTopicEncoder
from tfktopic.models.rgbn.topic_gated_lstm import TopicGatedLSTMStack
from tfktopic.models.rgbn.weibull import WeibullSampler


def _scalar(outputs):
    """sum_o sum(o * sin(1 + arange)) over all outputs: a fixed, generic probe."""
    total = 0.0
    for out in outputs:
        out = ops.cast(out, "float32")
        size = int(np.prod(out.shape))
        probe = ops.reshape(ops.sin(1.0 + ops.arange(size, dtype="float32")), out.shape)
        total = total + ops.sum(out * probe)
    return total


def _set_weights(layer, seed):
    rng = np.random.default_rng(seed)
    for variable in layer.trainable_variables:
        variable.assign(rng.uniform(-0.5, 0.5, variable.shape).astype("float32"))


def _run(layer, call, inputs):
    """Outputs of ``call(layer, *inputs)`` (a list) and gradients of `_scalar`
    with respect to `inputs` and the layer's trainable weights."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf
        tensors = [tf.constant(x) for x in inputs]
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            outputs = call(layer, *tensors)
            total = _scalar(outputs)
        grads = tape.gradient(total, tensors + list(layer.trainable_variables))
        return {"outputs": [np.asarray(o) for o in outputs],
                "grads": [np.asarray(g) for g in grads]}
    if backend == "jax":
        import jax
        trainable = [v.value for v in layer.trainable_variables]
        non_trainable = [v.value for v in layer.non_trainable_variables]

        def forward(weights, xs):
            with keras.StatelessScope(state_mapping=list(zip(
                    layer.trainable_variables + layer.non_trainable_variables,
                    weights + non_trainable))):
                outputs = call(layer, *xs)
            return _scalar(outputs), outputs

        (_, outputs), (d_weights, d_inputs) = jax.value_and_grad(
            forward, argnums=(0, 1), has_aux=True)(trainable, [jax.numpy.asarray(x)
                                                               for x in inputs])
        return {"outputs": [np.asarray(o) for o in outputs],
                "grads": [np.asarray(g) for g in list(d_inputs) + list(d_weights)]}
    raise NotImplementedError(backend)


def _data(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=shape).astype("float32") for shape in shapes]


def lstm():
    """keras.layers.LSTM through run_lstm: TensorFlow's hoisted fast path vs
    keras' LSTM on JAX."""
    layer = keras.layers.LSTM(6, return_sequences=True)
    layer.build((3, 7, 4))
    _set_weights(layer, 0)
    return _run(layer, lambda l, x: [run_lstm(l, x)], _data(1, (3, 7, 4)))


def factorized_lstm(masked=False):
    """FactorizedTopicLSTM: TensorFlow's custom-gradient kernel (unmasked) or
    the keras.ops.scan reference (masked) vs the reference on JAX."""
    layer = FactorizedTopicLSTM(6, num_topics=3, factor_dim=5, return_state=True)
    x, topic = _data(2, (3, 7, 4), (3, 3))
    mask = np.arange(7)[None, :] < np.array([[7], [4], [1]])
    layer(ops.convert_to_tensor(x), ops.convert_to_tensor(topic))
    _set_weights(layer, 3)
    if masked:
        return _run(layer, lambda l, x, t: list(l(x, t, mask=ops.convert_to_tensor(mask))),
                    [x, topic])
    return _run(layer, lambda l, x, t: list(l(x, t)), [x, topic])


def topic_experts_lstm():
    layer = TopicExpertsLSTM(5, num_experts=3)
    layer.build((2, 6, 4))
    _set_weights(layer, 4)
    return _run(layer, lambda l, x: [l(x)], _data(5, (2, 6, 4)))


def gaussian_encoder():
    layer = GaussianTopicEncoder(4, hidden_units=(8,))
    layer.build((3, 10))
    _set_weights(layer, 6)
    bow = np.abs(_data(7, (3, 10))[0]) * 3
    return _run(layer, lambda l, b: list(l(b)) + [l.kl(*l(b)[1:])], [bow])


def weibull_mean():
    k, lam = (np.abs(a) + 0.5 for a in _data(8, (2, 3, 1), (2, 3, 5)))
    return _run(WeibullSampler(seed=1), lambda l, k, lam: [l(k, lam)], [k, lam])


def topic_decoder():
    layer = TopicDecoder(num_topics=3, vocab_size=10)
    layer.build((2, 3))
    _set_weights(layer, 9)
    theta = np.float32([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    return _run(layer, lambda l, t: [l(t)], [theta])


def stopword_gate():
    layer = StopwordGate(vocab_size=6, lm_to_topic=[-1, -1, 0, -1, 1, 2], num_topics=2)
    hidden, theta = _data(10, (2, 3, 4), (2, 2))
    layer(ops.convert_to_tensor(hidden), ops.convert_to_tensor(theta))
    _set_weights(layer, 11)
    return _run(layer, lambda l, h, t: [v for _, v in sorted(l(h, t).items())], [hidden, theta])


def topic_gated_lstm():
    layer = TopicGatedLSTMStack(units=(5, 4), num_topics=(3, 2))
    x, t1, t2 = _data(12, (2, 6, 7), (2, 3), (2, 2))
    layer(ops.convert_to_tensor(x), [ops.convert_to_tensor(t1), ops.convert_to_tensor(t2)])
    _set_weights(layer, 13)
    return _run(layer, lambda l, x, a, b: list(l(x, [a, b])), [x, t1, t2])


CASES = ("lstm", "factorized_lstm", "topic_experts_lstm", "gaussian_encoder", "weibull_mean",
         "topic_decoder", "stopword_gate", "topic_gated_lstm")


def all_cases():
    """Every case in one process (one JAX start); the masked factorized LSTM too."""
    results = {name: globals()[name]() for name in CASES}
    results["factorized_lstm_masked"] = factorized_lstm(masked=True)
    return results
