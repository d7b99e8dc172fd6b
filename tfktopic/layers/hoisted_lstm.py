"""An LSTM for CPUs: products hoisted out of the time loop, loops compiled by XLA.

Keras' LSTM without cuDNN (every CPU run) steps `LSTMCell` through a loop; each
step multiplies its input by the input kernel, and the automatic backward pass
multiplies again inside the reverse loop for every weight gradient. Here:

* the input projections x_t W + b of all steps are one [N T, D] x [D, 4H]
  product, and only the recurrent product h_{t-1} U stays in the forward loop;
* the backward pass is written by hand: only dz_t U^T stays in the reverse
  loop, and dW, dU, db and dx are one product each over all steps;
* both loops are compiled by XLA, which fuses each step's element-wise gate
  arithmetic into a few kernels.

The standard LSTM equations (Hochreiter & Schmidhuber 1997) with Keras' gate
layout i, f, c, o (gate order: i, f, c, o, the package's one order):

    z_t = (x_t W + b) + h_{t-1} U
    i, f, g, o = sigmoid(z_i), sigmoid(z_f), tanh(z_c), sigmoid(z_o)
    c_t = f * c_{t-1} + i * g,    h_t = o * tanh(c_t)

from (h_0, c_0) = 0 or a given initial state, whose gradients the backward
pass returns too (the carried dh, dc left after step 1).

The weights are the Keras layer's own, so saved files load either way; on a
GPU, and for every option this path does not cover, the layer runs Keras' own
implementation (cuDNN on a GPU).
"""
import keras

from tfktopic import backend
from tfktopic.xla import XLA_LOOPS_VARIABLE, xla_loops  # noqa: F401 (re-exported)

__all__ = ["HoistedLSTM", "hoistable", "hoisted_lstm_sequence", "run_lstm", "use_keras_lstm",
           "xla_loops"]

#: The batch is padded up to a multiple of this before the XLA-compiled loops,
#: so that batches of varying size (e.g. after empty windows are dropped)
#: share a few compiled programs instead of compiling one per size.
BATCH_BUCKET = 8


@keras.saving.register_keras_serializable(package="tfktopic")
class HoistedLSTM(keras.layers.LSTM):
    """`keras.layers.LSTM` with a faster CPU path for whole sequences.

    Same arguments, weights and results as `keras.layers.LSTM` (tested to
    float32 round-off, values and gradients, eager and in `tf.function`). The
    fast path is taken for full sequences (``return_sequences=True``, with or
    without an initial state, ``return_state`` and ``stateful``) with the
    default activations, a bias, no dropout inside the cell, no mask, no
    ``go_backwards``/``unroll``, and when no GPU is visible (there Keras
    uses cuDNN). Otherwise
    the layer is `keras.layers.LSTM`. On a 2-core CPU the fast path takes ~40%
    less wall time than Keras' LSTM for the forward and backward pass of a
    256-unit layer over 57 windows of 30 steps (~23% without XLA). Gradients
    are first order only (the backward pass is hand-written).

    Args:
        units: as `keras.layers.LSTM`.
        jit_compile: compile the two time loops with XLA (each new padded
            batch size or sequence length compiles once, ~0.3 s); `False`
            runs them as plain `tf.scan`s.
        **kwargs: as `keras.layers.LSTM`.

    Example:
    >>> lstm = HoistedLSTM(8, return_sequences=True)
    >>> tuple(lstm(keras.ops.ones((2, 5, 3))).shape)
    (2, 5, 8)
    """

    def __init__(self, units, jit_compile=True, **kwargs):
        super().__init__(units, **kwargs)
        self.jit_compile = bool(jit_compile)

    def call(self, sequences, initial_state=None, mask=None, training=False):
        if not hoistable(self, initial_state, mask, training):
            return super().call(sequences, initial_state=initial_state, mask=mask,
                                training=training)
        return _hoisted_call(self, sequences, initial_state, self.jit_compile)

    def get_config(self):
        return {**super().get_config(), "jit_compile": self.jit_compile}


def hoistable(layer, initial_state=None, mask=None, training=False):
    """Whether the fast path computes exactly what `keras.layers.LSTM` `layer` would.

    Args:
        layer: a `keras.layers.LSTM` (or `HoistedLSTM`).
        initial_state, mask, training: the call's arguments.

    Returns:
        True for whole sequences (from zero or a given state, with or without
        ``return_state``) with the default activations, a bias, no dropout in
        the cell (when training), no mask, and no GPU.
    """
    del initial_state  # both are covered
    if not backend.is_tensorflow():   # the one hook: the fast path is TensorFlow's kernel
        return False
    if not isinstance(layer, keras.layers.LSTM):   # a GRU / SimpleRNN is not this recurrence
        return False
    if getattr(layer, _KERAS_PATH, False):   # `use_keras_lstm`
        return False
    cell = layer.cell
    dropout = training and (cell.dropout > 0 or cell.recurrent_dropout > 0)
    return (mask is None and not dropout
            and layer.return_sequences
            and not layer.go_backwards and not layer.unroll
            and cell.use_bias
            and cell.activation is keras.activations.tanh
            and cell.recurrent_activation is keras.activations.sigmoid
            and not _gpu_visible())


def _gpu_visible():
    """Whether TensorFlow sees a GPU (there Keras' LSTM runs cuDNN instead)."""
    import tensorflow as tf
    return bool(tf.config.list_logical_devices("GPU"))


#: The attribute `use_keras_lstm` sets on a layer.
_KERAS_PATH = "_tfktopic_keras_lstm"


def use_keras_lstm(layer, enabled=True):
    """Make every LSTM inside `layer` (a model or a layer) run Keras' own
    implementation instead of the fast path: the reference the fast path is
    tested and timed against (``benchmarks.topic_models``' "plain Keras LSTM").

    Set it before the model's first call or training step: a traced function
    keeps the path it was traced with.

    Args:
        layer: a `keras.layers.Layer` or `keras.Model`.
        enabled: True for Keras' path, False for the fast path again.

    Returns:
        The number of LSTM layers set.

    Example:
    >>> model = keras.Sequential([keras.layers.LSTM(4, return_sequences=True)])
    >>> use_keras_lstm(model)
    1
    """
    lstms = [sub for sub in layer._flatten_layers(include_self=True, recursive=True)
             if isinstance(sub, keras.layers.LSTM)]
    for lstm in lstms:
        setattr(lstm, _KERAS_PATH, bool(enabled))
    return len(lstms)


def run_lstm(layer, inputs, training=False, jit_compile=True, initial_state=None, mask=None):
    """Run the `keras.layers.LSTM` `layer` on `inputs`, by the fast path when
    `hoistable`, else by calling it.

    Models that own plain `keras.layers.LSTM` sublayers use this to keep
    their saved files unchanged (a `HoistedLSTM` saves under its own name).

    Args:
        layer: a built `keras.layers.LSTM` with ``return_sequences=True`` (any other
            recurrent layer, e.g. a GRU, is called as it is).
        inputs: float [N, T, D].
        training: passed to the layer (its dropout, if any).
        jit_compile: XLA-compile the fast path's loops.
        initial_state: optional ``[h_0, c_0]``, each float [N, H].
        mask: optional bool [N, T]; with a mask it is the layer's own call.
            Pass it explicitly: a mask attached to `inputs` by an ``Embedding(
            mask_zero=True)`` is not looked at here.

    Returns:
        What ``layer(inputs, initial_state=initial_state, training=training)``
        returns: float [N, T, H], or ``[outputs, h_T, c_T]`` when the layer
        has ``return_state=True``.
    """
    if not hoistable(layer, initial_state, mask, training=training):
        return layer(inputs, initial_state=initial_state, mask=mask, training=training)
    return _hoisted_call(layer, inputs, initial_state, jit_compile)


def _hoisted_call(layer, inputs, initial_state, jit_compile):
    """The fast path of a `hoistable` LSTM layer, returning what the layer would."""
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    if not layer.built:   # first call of a model that did not build it (as Keras' call would)
        layer.build(tuple(inputs.shape))
    if layer.stateful:    # Keras' stateful RNN: start from, and then keep, its state variables
        expected, rows = layer.states[0].shape[0], inputs.shape[0]
        if rows is not None and rows != expected:
            raise ValueError(f"{layer.name}: a stateful LSTM keeps the state of {expected} "
                             f"rows; the input has {rows} (use the same batch size)")
        if initial_state is None:
            initial_state = [tf.convert_to_tensor(v) for v in layer.states]
    hidden, h_last, c_last = hoisted_lstm_sequence(
        inputs, layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias,
        jit_compile=jit_compile, initial_state=initial_state, return_state=True)
    if layer.stateful:
        for variable, value in zip(layer.states, (h_last, c_last)):
            variable.assign(tf.cast(tf.stop_gradient(value), variable.dtype))
    return [hidden, h_last, c_last] if layer.return_state else hidden


def hoisted_lstm_sequence(inputs, kernel, recurrent_kernel, bias, jit_compile=True,
                          initial_state=None, return_state=False):
    """h_t for all t of an LSTM run from zero state (or `initial_state`) over `inputs`.

    Args:
        inputs: float [N, T, D].
        kernel, recurrent_kernel, bias: [D, 4H], [H, 4H], [4H] (gates i, f, c, o).
        jit_compile: run the time loops as XLA programs.
        initial_state: optional ``[h_0, c_0]``, each float [N, H] (default zeros);
            gradients reach them.
        return_state: also return the last step's h_T and c_T.

    Returns:
        float [N, T, H]; with `return_state`, ``(outputs, h_T, c_T)``.
    """
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    inputs = tf.convert_to_tensor(inputs)
    weights = [tf.cast(tf.convert_to_tensor(w), inputs.dtype)
               for w in (kernel, recurrent_kernel, bias)]
    # The static shapes the XLA programs' outputs lose (a Dense after this builds from them).
    static = inputs.shape[:2].concatenate(weights[1].shape[:1])
    size = tf.shape(inputs)[0]
    units = tf.shape(weights[1])[0]
    if initial_state is None:
        states = [tf.zeros(tf.stack([size, units]), inputs.dtype)] * 2
    else:
        states = [tf.cast(tf.convert_to_tensor(s), inputs.dtype) for s in initial_state]
    jit_compile = xla_loops(jit_compile, inputs.dtype)
    if jit_compile:
        # Rows are independent sequences: zero rows only round the size up
        # (one compiled program per bucket, not per batch size).
        padded = (size + BATCH_BUCKET - 1) // BATCH_BUCKET * BATCH_BUCKET
        inputs = tf.pad(inputs, [[0, padded - size], [0, 0], [0, 0]])
        states = [tf.pad(s, [[0, padded - size], [0, 0]]) for s in states]
    time_major = tf.transpose(inputs, (1, 0, 2))
    hidden, c_last = _LSTM[bool(jit_compile)](time_major, *weights, *states)
    outputs = tf.transpose(hidden, (1, 0, 2))[:size]
    outputs.set_shape(static)
    if not return_state:
        return outputs
    c_last = c_last[:size]
    c_last.set_shape(static[:1].concatenate(static[2:]))
    return outputs, outputs[:, -1], c_last


def _forward_loop(inputs, kernel, recurrent_kernel, bias, h_0, c_0):
    """Forward pass over time-major inputs [T, N, D] from (h_0, c_0): h, c and the
    gates i, f, g, o of every step, each [T, N, H]."""
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    projections = tf.einsum("tnd,dg->tng", inputs, kernel) + bias
    zeros = tf.zeros_like(h_0)

    def step(state, projection):
        h, c = state[0], state[1]
        z_i, z_f, z_c, z_o = tf.split(projection + tf.matmul(h, recurrent_kernel), 4, axis=-1)
        i, f, g, o = tf.sigmoid(z_i), tf.sigmoid(z_f), tf.tanh(z_c), tf.sigmoid(z_o)
        c = f * c + i * g
        return o * tf.tanh(c), c, i, f, g, o

    return tf.scan(step, projections, initializer=(h_0, c_0) + (zeros,) * 4)


def _backward_loop(d_hidden, d_c_last, inputs, kernel, recurrent_kernel, h_0, c_0, hidden,
                   cells, i, f, g, o):
    """Gradients (dx, dW, dU, db, dh_0, dc_0) of sum(d_hidden * h) + sum(d_c_last * c_T)
    (equations: `_make_lstm`)."""
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    previous_h = tf.concat([h_0[None], hidden[:-1]], axis=0)
    previous_c = tf.concat([c_0[None], cells[:-1]], axis=0)
    recurrent_t = tf.transpose(recurrent_kernel)
    zeros = tf.zeros_like(h_0)

    def back(carry, step_values):
        dh_next, dc_next = carry[0], carry[1]
        dh_out, c, c_prev, i_t, f_t, g_t, o_t = step_values
        dh = dh_out + dh_next
        tanh_c = tf.tanh(c)
        dc = dc_next + dh * o_t * (1.0 - tanh_c * tanh_c)
        dz = tf.concat([dc * g_t * i_t * (1.0 - i_t), dc * c_prev * f_t * (1.0 - f_t),
                        dc * i_t * (1.0 - g_t * g_t), dh * tanh_c * o_t * (1.0 - o_t)], axis=-1)
        return tf.matmul(dz, recurrent_t), dc * f_t, dz

    dh_carried, dc_carried, dz = tf.scan(
        back, (d_hidden, cells, previous_c, i, f, g, o),
        initializer=(zeros, d_c_last, tf.concat([zeros] * 4, axis=-1)), reverse=True)
    return (tf.einsum("tng,dg->tnd", dz, kernel), tf.einsum("tnd,tng->dg", inputs, dz),
            tf.einsum("tnh,tng->hg", previous_h, dz), tf.reduce_sum(dz, axis=(0, 1)),
            dh_carried[0], dc_carried[0])


def _make_lstm(forward, backward):
    """The LSTM over time-major inputs [T, N, D] from (h_0, c_0), with a
    hand-written gradient; returns h of every step [T, N, H] and c_T [N, H].

    Backward, with dh_t the output gradient plus the one carried from t + 1,
    and dc_{T+1} f_{T+1} read as the gradient of c_T:

        dc_t = dc_{t+1} f_{t+1} + dh_t o_t (1 - tanh^2 c_t)
        dz_i = dc_t g_t i_t (1 - i_t),    dz_f = dc_t c_{t-1} f_t (1 - f_t)
        dz_c = dc_t i_t (1 - g_t^2),      dz_o = dh_t tanh(c_t) o_t (1 - o_t)
        dh_{t-1} (carried) = dz_t U^T

    then dW = sum_t x_t^T dz_t, dU = sum_t h_{t-1}^T dz_t, db = sum_t dz_t and
    dx_t = dz_t W^T, each one product over all steps; dh_0 and dc_0 are the
    carried dh_0 = dz_1 U^T and dc_0 = dc_1 f_1.
    """
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    @tf.custom_gradient
    def lstm(inputs, kernel, recurrent_kernel, bias, h_0, c_0):
        # The gradient is `grad`: no tape needs the loops' own (an XLA program
        # cannot hand its loop accumulators to TensorFlow's automatic gradient).
        inputs, kernel, recurrent_kernel, bias, h_0, c_0 = (
            tf.stop_gradient(t) for t in (inputs, kernel, recurrent_kernel, bias, h_0, c_0))
        hidden, cells, i, f, g, o = forward(inputs, kernel, recurrent_kernel, bias, h_0, c_0)

        def grad(d_hidden, d_c_last):
            if d_c_last is None:   # c_T unused
                d_c_last = tf.zeros_like(c_0)
            return backward(d_hidden, d_c_last, inputs, kernel, recurrent_kernel, h_0, c_0,
                            hidden, cells, i, f, g, o)

        return (hidden, cells[-1]), grad

    return lstm


class _Loops(dict):
    """The time-major LSTM with plain (False) or XLA-compiled (True) loops,
    built on first use (so that importing this module does not import TensorFlow)."""

    def __missing__(self, jit):
        import tensorflow as tf
        if jit:
            lstm = _make_lstm(tf.function(_forward_loop, jit_compile=True, reduce_retracing=True),
                              tf.function(_backward_loop, jit_compile=True,
                                          reduce_retracing=True))
        else:
            lstm = _make_lstm(_forward_loop, _backward_loop)
        self[jit] = lstm
        return lstm


_LSTM = _Loops()
