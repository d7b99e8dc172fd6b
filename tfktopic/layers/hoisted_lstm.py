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
layout i, f, c, o:

    z_t = (x_t W + b) + h_{t-1} U
    i, f, g, o = sigmoid(z_i), sigmoid(z_f), tanh(z_c), sigmoid(z_o)
    c_t = f * c_{t-1} + i * g,    h_t = o * tanh(c_t)

The weights are the Keras layer's own, so saved files load either way; on a
GPU, and for every option this path does not cover, the layer runs Keras' own
implementation (cuDNN on a GPU).
"""
import keras
import tensorflow as tf

__all__ = ["HoistedLSTM", "hoistable", "hoisted_lstm_sequence", "run_lstm"]

#: The batch is padded up to a multiple of this before the XLA-compiled loops,
#: so that batches of varying size (e.g. after empty windows are dropped)
#: share a few compiled programs instead of compiling one per size.
BATCH_BUCKET = 8


@keras.saving.register_keras_serializable(package="tfktopic")
class HoistedLSTM(keras.layers.LSTM):
    """`keras.layers.LSTM` with a faster CPU path for whole sequences.

    Same arguments, weights and results as `keras.layers.LSTM` (tested to
    float32 round-off, values and gradients, eager and in `tf.function`). The
    fast path is taken for full sequences (``return_sequences=True``) with the
    default activations, a bias, no dropout inside the cell, no mask, no
    initial state, no ``return_state``/``go_backwards``/``stateful``/
    ``unroll``, and when no GPU is visible (there Keras uses cuDNN). Otherwise
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
        return hoisted_lstm_sequence(sequences, self.cell.kernel, self.cell.recurrent_kernel,
                                     self.cell.bias, jit_compile=self.jit_compile)

    def get_config(self):
        return {**super().get_config(), "jit_compile": self.jit_compile}


def hoistable(layer, initial_state=None, mask=None, training=False):
    """Whether the fast path computes exactly what `keras.layers.LSTM` `layer` would.

    Args:
        layer: a `keras.layers.LSTM` (or `HoistedLSTM`).
        initial_state, mask, training: the call's arguments.

    Returns:
        True for whole sequences from zero state with the default activations,
        a bias, no dropout in the cell (when training), no mask, and no GPU.
    """
    cell = layer.cell
    dropout = training and (cell.dropout > 0 or cell.recurrent_dropout > 0)
    return (initial_state is None and mask is None and not dropout
            and layer.return_sequences and not layer.return_state
            and not layer.go_backwards and not layer.stateful and not layer.unroll
            and cell.use_bias
            and cell.activation is keras.activations.tanh
            and cell.recurrent_activation is keras.activations.sigmoid
            and not tf.config.list_logical_devices("GPU"))


def run_lstm(layer, inputs, training=False, jit_compile=True):
    """Run the `keras.layers.LSTM` `layer` on `inputs`, by the fast path when
    `hoistable`, else by calling it.

    Models that own plain `keras.layers.LSTM` sublayers use this to keep
    their saved files unchanged (a `HoistedLSTM` saves under its own name).

    Args:
        layer: a built `keras.layers.LSTM` with ``return_sequences=True``.
        inputs: float [N, T, D].
        training: passed to the layer (its dropout, if any).
        jit_compile: XLA-compile the fast path's loops.

    Returns:
        float [N, T, H], what ``layer(inputs, training=training)`` returns.
    """
    if not hoistable(layer, training=training):
        return layer(inputs, training=training)
    return hoisted_lstm_sequence(inputs, layer.cell.kernel, layer.cell.recurrent_kernel,
                                 layer.cell.bias, jit_compile=jit_compile)


def hoisted_lstm_sequence(inputs, kernel, recurrent_kernel, bias, jit_compile=True):
    """h_t for all t of an LSTM run from zero state over `inputs`.

    Args:
        inputs: float [N, T, D].
        kernel, recurrent_kernel, bias: [D, 4H], [H, 4H], [4H] (gates i, f, c, o).
        jit_compile: run the time loops as XLA programs.

    Returns:
        float [N, T, H].
    """
    inputs = tf.convert_to_tensor(inputs)
    weights = [tf.cast(tf.convert_to_tensor(w), inputs.dtype)
               for w in (kernel, recurrent_kernel, bias)]
    size = tf.shape(inputs)[0]
    if jit_compile:
        # Rows are independent sequences: zero rows only round the size up
        # (one compiled program per bucket, not per batch size).
        padded = (size + BATCH_BUCKET - 1) // BATCH_BUCKET * BATCH_BUCKET
        inputs = tf.pad(inputs, [[0, padded - size], [0, 0], [0, 0]])
    time_major = tf.transpose(inputs, (1, 0, 2))
    hidden = _LSTM[bool(jit_compile)](time_major, *weights)
    return tf.transpose(hidden, (1, 0, 2))[:size]


def _forward_loop(inputs, kernel, recurrent_kernel, bias):
    """Forward pass over time-major inputs [T, N, D]: h, c and the gates
    i, f, g, o of every step, each [T, N, H]."""
    projections = tf.einsum("tnd,dg->tng", inputs, kernel) + bias
    zeros = tf.zeros((tf.shape(inputs)[1], tf.shape(recurrent_kernel)[0]), inputs.dtype)

    def step(state, projection):
        h, c = state[0], state[1]
        z_i, z_f, z_c, z_o = tf.split(projection + tf.matmul(h, recurrent_kernel), 4, axis=-1)
        i, f, g, o = tf.sigmoid(z_i), tf.sigmoid(z_f), tf.tanh(z_c), tf.sigmoid(z_o)
        c = f * c + i * g
        return o * tf.tanh(c), c, i, f, g, o

    return tf.scan(step, projections, initializer=(zeros,) * 6)


def _backward_loop(d_hidden, inputs, kernel, recurrent_kernel, hidden, cells, i, f, g, o):
    """Gradients (dx, dW, dU, db) of sum(d_hidden * h) (equations: `_make_lstm`)."""
    zeros = tf.zeros_like(hidden[0])
    previous_h = tf.concat([zeros[None], hidden[:-1]], axis=0)
    previous_c = tf.concat([zeros[None], cells[:-1]], axis=0)
    recurrent_t = tf.transpose(recurrent_kernel)

    def back(carry, step_values):
        dh_next, dc_next = carry[0], carry[1]
        dh_out, c, c_prev, i_t, f_t, g_t, o_t = step_values
        dh = dh_out + dh_next
        tanh_c = tf.tanh(c)
        dc = dc_next + dh * o_t * (1.0 - tanh_c * tanh_c)
        dz = tf.concat([dc * g_t * i_t * (1.0 - i_t), dc * c_prev * f_t * (1.0 - f_t),
                        dc * i_t * (1.0 - g_t * g_t), dh * tanh_c * o_t * (1.0 - o_t)], axis=-1)
        return tf.matmul(dz, recurrent_t), dc * f_t, dz

    _, _, dz = tf.scan(back, (d_hidden, cells, previous_c, i, f, g, o),
                       initializer=(zeros, zeros, tf.concat([zeros] * 4, axis=-1)),
                       reverse=True)
    return (tf.einsum("tng,dg->tnd", dz, kernel), tf.einsum("tnd,tng->dg", inputs, dz),
            tf.einsum("tnh,tng->hg", previous_h, dz), tf.reduce_sum(dz, axis=(0, 1)))


def _make_lstm(forward, backward):
    """The LSTM over time-major inputs [T, N, D] from zero state, with a
    hand-written gradient; returns h of every step [T, N, H].

    Backward, with dh_t the output gradient plus the one carried from t + 1:

        dc_t = dc_{t+1} f_{t+1} + dh_t o_t (1 - tanh^2 c_t)
        dz_i = dc_t g_t i_t (1 - i_t),    dz_f = dc_t c_{t-1} f_t (1 - f_t)
        dz_c = dc_t i_t (1 - g_t^2),      dz_o = dh_t tanh(c_t) o_t (1 - o_t)
        dh_{t-1} (carried) = dz_t U^T

    then dW = sum_t x_t^T dz_t, dU = sum_t h_{t-1}^T dz_t, db = sum_t dz_t and
    dx_t = dz_t W^T, each one product over all steps.
    """
    @tf.custom_gradient
    def lstm(inputs, kernel, recurrent_kernel, bias):
        # The gradient is `grad`: no tape needs the loops' own (an XLA program
        # cannot hand its loop accumulators to TensorFlow's automatic gradient).
        inputs, kernel, recurrent_kernel, bias = (
            tf.stop_gradient(t) for t in (inputs, kernel, recurrent_kernel, bias))
        hidden, cells, i, f, g, o = forward(inputs, kernel, recurrent_kernel, bias)

        def grad(d_hidden):
            return backward(d_hidden, inputs, kernel, recurrent_kernel, hidden, cells,
                            i, f, g, o)

        return hidden, grad

    return lstm


#: The time-major LSTM with plain (False) or XLA-compiled (True) loops.
_LSTM = {False: _make_lstm(_forward_loop, _backward_loop),
         True: _make_lstm(tf.function(_forward_loop, jit_compile=True, reduce_retracing=True),
                          tf.function(_backward_loop, jit_compile=True,
                                      reduce_retracing=True))}
