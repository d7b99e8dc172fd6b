"""TCNLM's factorised recurrence for CPUs: loops compiled by XLA, backward by hand.

The fast path of `FactorizedTopicLSTM` (in the style of `hoisted_lstm`). With
the input side X_t = W_*a((W_*b t) ⊙ (W_*c x_t)) + b_* of every step computed
before the loop (one product, `FactorizedTopicLSTMCell.input_side`) and the
recurrent topic factors s_* = U_*b t computed once per sequence, the loop is
(Wang et al. 2018, eqs. 13-15; gates in keras' order i, f, c, o)

    a_t = h_{t-1} U_*c                                       (13, [B, n_f] per gate)
    pre_t = X_t + U_*a (s_* ⊙ a_t)                           (13-14)
    i, f, o = sigmoid(pre_i, pre_f, pre_o),  g = tanh(pre_c)
    c_t = f c_{t-1} + i g,    h_t = o tanh(c_t)              (15)

The forward loop keeps only the two recurrent products per step (h U_*c for
all four gates as one [B, n_h] x [n_h, 4 n_f] product, then the four
[B, n_f] x [n_f, n_h] products of U_*a). The backward pass is written by hand
(`tf.custom_gradient`): only the recurrent products dA_t = d pre_t U_*a^T and
dh_{t-1} = (s ⊙ dA_t) U_*c^T stay in the reverse loop, and every other
gradient is one product or sum over all steps after it (see `_make_recurrence`).
Autodiff carries d pre (= dX) and ds back through the input side and U_*b t
(one product each, outside this module).

Profile of one TCNLM medium training step (APNEWS benchmark batches of
64 x 30, n_h = n_f = 256, K = 50, V = 4,591; each piece timed as its own
`tf.function` on the 2-core CPU while other training processes ran, so the
numbers are rough): with the while loop, step 506 ms, of which the
factorised LSTM forward + backward 320 ms (forward 131 ms), the softmax and
NLL 149 ms, the neural topic model with the diversity term 14 ms. With this
path: step 399 ms, factorised LSTM 215 ms (forward 61 ms), softmax 137 ms,
NTM 13 ms; of the LSTM's 215 ms, the input side (one product before the
loop, autodiff) is ~75 ms and the recurrence ~120 ms (forward loop ~40 ms,
reverse loop ~40 ms, the after-loop products dU_a, dU_c ~15 ms each). The
recurrence does twice an LSTM's recurrent products (h U_c, then U_a per
gate). Counted per token (forward; backward is twice that for both models), with the
medium sizes E = 128, n_h = n_f = 256, V = 4,591: the LSTM LM does 2(E + n_h)4n_h +
2 n_h V = 3.14 MFLOP, TCNLM 2E·4n_f + 4·2n_f n_h (input side) + 2n_h·4n_f + 4·2n_f n_h
(recurrence) + 2 n_h V = 4.19 MFLOP, i.e. 1.33x: at equal FLOP/s TCNLM's tokens/s would be
0.75 of the LSTM LM's (the neural topic model, per document, adds little). The measured
0.773 (idle, median of 3: ``benchmarks/results/medium/speed_tcnlm_idle_*.json``) is at
that bound, so the loops run at about the speed per FLOP of `HoistedLSTM`'s; a ratio of
0.8 would need TCNLM to beat the LSTM LM's own FLOP efficiency.
Training tokens/s of TCNLM / Keras' LSTM LM (``python -m benchmarks.speed
--mode medium --models tcnlm``), all measured while the study's two training
processes (and other tests) loaded the 2 cores, so the ratios swing with the
load: before 0.65 (load ~2) and 0.60 (load ~5); after 0.74 and 0.78 (load
~2-4), 0.58 and 0.65 (load ~5.6). In one process, interleaved over 5 rounds at
load ~5, this path gave TCNLM 1.22x (fastest round) and 1.34x (median) the
tokens/s of the while loop (0.63 / 0.70 of the Keras LSTM LM against 0.52).
"""
from tfktopic.layers.hoisted_lstm import BATCH_BUCKET, xla_loops

__all__ = ["factorized_recurrence"]


def factorized_recurrence(input_side, topic_factors, factor_kernel, output_kernel,
                          initial_state=None, jit_compile=True):
    """Run the factorised topic LSTM's recurrence over whole sequences.

    Args:
        input_side: float [L, 4, B, n_h], time-major and gate-major (i, f, c, o):
            X_t = W_*a((W_*b t) ⊙ (W_*c x_t)) + b_* of every step; gradients reach it.
        topic_factors: float [4, B, n_f], s_* = U_*b t; gradients reach it.
        factor_kernel: U_*c, [4, n_h, n_f].
        output_kernel: U_*a, [4, n_f, n_h].
        initial_state: optional ``[h_0, c_0]``, each float [B, n_h] (default
            zeros); gradients reach them.
        jit_compile: run the two time loops as XLA programs (the batch padded
            up to a multiple of `hoisted_lstm.BATCH_BUCKET`).

    Returns:
        (outputs, h_L, c_L): float [L, B, n_h] (time-major) and [B, n_h] twice.

    Example (L = 5 steps, B = 2, n_h = 3, n_f = 6; TensorFlow backend):
    >>> import tensorflow as tf
    >>> outputs, h, c = factorized_recurrence(
    ...     tf.zeros((5, 4, 2, 3)), tf.ones((4, 2, 6)), tf.zeros((4, 3, 6)), tf.zeros((4, 6, 3)))
    >>> tuple(outputs.shape), tuple(c.shape)
    ((5, 2, 3), (2, 3))
    """
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    input_side = tf.convert_to_tensor(input_side)
    dtype = input_side.dtype
    topic_factors, factor_kernel, output_kernel = (
        tf.cast(tf.convert_to_tensor(w), dtype)
        for w in (topic_factors, factor_kernel, output_kernel))
    static = input_side.shape[:1].concatenate(input_side.shape[2:])   # [L, B, n_h]
    size = tf.shape(input_side)[2]
    units = tf.shape(output_kernel)[2]
    if initial_state is None:
        states = [tf.zeros(tf.stack([size, units]), dtype)] * 2
    else:
        states = [tf.cast(tf.convert_to_tensor(s), dtype) for s in initial_state]
    jit_compile = xla_loops(jit_compile, dtype)
    if jit_compile:
        # Rows are independent sequences: zero rows only round the size up.
        padded = (size + BATCH_BUCKET - 1) // BATCH_BUCKET * BATCH_BUCKET
        input_side = tf.pad(input_side, [[0, 0], [0, 0], [0, padded - size], [0, 0]])
        topic_factors = tf.pad(topic_factors, [[0, 0], [0, padded - size], [0, 0]])
        states = [tf.pad(s, [[0, padded - size], [0, 0]]) for s in states]
    hidden, c_last = _RECURRENCE[bool(jit_compile)](input_side, topic_factors, factor_kernel,
                                                    output_kernel, *states)
    hidden = hidden[:, :size]
    hidden.set_shape(static)
    c_last = c_last[:size]
    c_last.set_shape(static[1:])
    return hidden, hidden[-1], c_last


def _concat_gates(factor_kernel):
    """U_*c of the four gates side by side: [n_h, 4 n_f] (gate-major columns)."""
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    shape = tf.shape(factor_kernel)
    return tf.reshape(tf.transpose(factor_kernel, (1, 0, 2)), (shape[1], 4 * shape[2]))


def _gate_major(batch_major):
    """[B, 4 n_f] (gate-major columns) -> [4, B, n_f]."""
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    shape = tf.shape(batch_major)
    return tf.transpose(tf.reshape(batch_major, (shape[0], 4, shape[1] // 4)), (1, 0, 2))


def _batch_major(gate_major):
    """[4, B, n_f] -> [B, 4 n_f] (the inverse of `_gate_major`)."""
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    shape = tf.shape(gate_major)
    return tf.reshape(tf.transpose(gate_major, (1, 0, 2)), (shape[1], 4 * shape[2]))


def _forward_loop(input_side, topic_factors, factor_kernel, output_kernel, h_0, c_0):
    """Forward pass (eqs. 13-15): h and c of every step [L, B, n_h], the activated
    gates i, f, g, o [L, 4, B, n_h], the factors a_t = h_{t-1} U_*c and s ⊙ a_t
    [L, 4, B, n_f]."""
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    factors_side_by_side = _concat_gates(factor_kernel)

    def step(carry, x_t):
        h, c = carry[0], carry[1]
        a = _gate_major(tf.matmul(h, factors_side_by_side))                        # (13)
        topic_a = topic_factors * a
        pre = x_t + tf.matmul(topic_a, output_kernel)                              # (13-14)
        gates = tf.concat([tf.sigmoid(pre[:2]), tf.tanh(pre[2:3]), tf.sigmoid(pre[3:])], axis=0)
        c = gates[1] * c + gates[0] * gates[2]                                     # (15)
        return tf.tanh(c) * gates[3], c, gates, a, topic_a

    zeros = tf.zeros_like(topic_factors)
    return tf.scan(step, input_side,
                   initializer=(h_0, c_0, tf.zeros_like(input_side[0]), zeros, zeros))


def _backward_loop(d_hidden, d_c_last, topic_factors, factor_kernel, output_kernel, h_0, c_0,
                   hidden, cells, gates, factors, topic_a):
    """Gradients (dX, ds, dU_c, dU_a, dh_0, dc_0) of sum(d_hidden * h) + sum(d_c_last * c_L)
    (equations: `_make_recurrence`)."""
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    previous_h = tf.concat([h_0[None], hidden[:-1]], axis=0)
    previous_c = tf.concat([c_0[None], cells[:-1]], axis=0)
    factors_side_by_side_t = tf.transpose(_concat_gates(factor_kernel))             # [4n_f, n_h]

    def back(carry, step_values):
        dh_next, dc_next, d_topic = carry[0], carry[1], carry[2]
        dh_out, c, c_prev, gates_t, a = step_values
        i, f, g, o = gates_t[0], gates_t[1], gates_t[2], gates_t[3]
        dh = dh_out + dh_next
        tanh_c = tf.tanh(c)
        dc = dc_next + dh * o * (1.0 - tanh_c * tanh_c)
        d_pre = tf.stack([dc * g * i * (1.0 - i), dc * c_prev * f * (1.0 - f),
                          dc * i * (1.0 - g * g), dh * tanh_c * o * (1.0 - o)])
        d_a = tf.matmul(d_pre, output_kernel, transpose_b=True)                     # [4, B, n_f]
        d_factors = _batch_major(topic_factors * d_a)                               # [B, 4 n_f]
        dh_prev = tf.matmul(d_factors, factors_side_by_side_t)
        return dh_prev, dc * f, d_topic + d_a * a, d_pre, d_factors

    zeros = tf.zeros_like(h_0)
    dh_carried, dc_carried, d_topic, d_pre, d_factors = tf.scan(
        back, (d_hidden, cells, previous_c, gates, factors),
        initializer=(zeros, d_c_last, tf.zeros_like(topic_factors), tf.zeros_like(gates[0]),
                     _batch_major(tf.zeros_like(topic_factors))),
        reverse=True)
    # One product each over all L B rows: dU_c as [n_h, 4 n_f], dU_a per gate.
    units = tf.shape(h_0)[1]
    d_factor_kernel = tf.matmul(tf.reshape(previous_h, (-1, units)),
                                tf.reshape(d_factors, (-1, tf.shape(d_factors)[2])),
                                transpose_a=True)
    d_factor_kernel = tf.transpose(tf.reshape(d_factor_kernel, (units, 4, -1)), (1, 0, 2))
    d_output_kernel = tf.einsum("tgbf,tgbh->gfh", topic_a, d_pre)
    # The reverse scan's carries are stacked by step: index 0 holds the sum over all steps.
    return (d_pre, d_topic[0], d_factor_kernel, d_output_kernel, dh_carried[0], dc_carried[0])


def _make_recurrence(forward, backward):
    """The recurrence from (h_0, c_0) with a hand-written gradient; returns h of
    every step [L, B, n_h] and c_L [B, n_h].

    Backward, with dh_t the output gradient plus the one carried from t + 1,
    and dc_{L+1} f_{L+1} read as the gradient of c_L (eq. 15 differentiated):

        dc_t = dc_{t+1} f_{t+1} + dh_t o_t (1 - tanh^2 c_t)
        dpre_i = dc_t g_t i_t (1 - i_t),    dpre_f = dc_t c_{t-1} f_t (1 - f_t)
        dpre_o = dh_t tanh(c_t) o_t (1 - o_t),    dpre_c = dc_t i_t (1 - g_t^2)
        dA_t = dpre_t U_*a^T                         (eq. 14, per gate, in the loop)
        dh_{t-1} (carried) = sum_* (s_* ⊙ dA_t) U_*c^T   (eq. 13, in the loop)

    then, each one product (or sum) over all steps after the loop:

        dX_t = dpre_t,    ds_* = sum_t dA_t ⊙ a_t,
        dU_*a = sum_t (s_* ⊙ a_t)^T dpre_t,    dU_*c = sum_t h_{t-1}^T (s_* ⊙ dA_t),

    and dh_0, dc_0 are the carried dh and dc left after step 1.
    """
    import tensorflow as tf  # the TensorFlow fast path only (lazy: JAX never imports it)
    @tf.custom_gradient
    def recurrence(input_side, topic_factors, factor_kernel, output_kernel, h_0, c_0):
        # The gradient is `grad`: no tape needs the loops' own.
        input_side, topic_factors, factor_kernel, output_kernel, h_0, c_0 = (
            tf.stop_gradient(t) for t in (input_side, topic_factors, factor_kernel,
                                          output_kernel, h_0, c_0))
        hidden, cells, gates, factors, topic_a = forward(input_side, topic_factors,
                                                         factor_kernel, output_kernel, h_0, c_0)

        def grad(d_hidden, d_c_last):
            if d_c_last is None:   # c_L unused
                d_c_last = tf.zeros_like(c_0)
            return backward(d_hidden, d_c_last, topic_factors, factor_kernel, output_kernel,
                            h_0, c_0, hidden, cells, gates, factors, topic_a)

        return (hidden, cells[-1]), grad

    return recurrence


class _Recurrences(dict):
    """The recurrence with plain (False) or XLA-compiled (True) loops, built on
    first use (so that importing this module does not import TensorFlow)."""

    def __missing__(self, jit):
        import tensorflow as tf
        if jit:
            recurrence = _make_recurrence(
                tf.function(_forward_loop, jit_compile=True, reduce_retracing=True),
                tf.function(_backward_loop, jit_compile=True, reduce_retracing=True))
        else:
            recurrence = _make_recurrence(_forward_loop, _backward_loop)
        self[jit] = recurrence
        return recurrence


_RECURRENCE = _Recurrences()
