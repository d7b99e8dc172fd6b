"""log softmax(logits)[target]: the softmax cross-entropy of every training objective.

    log p(y) = z_y - logsumexp(z),    d log p(y) / dz = onehot(y) - softmax(z)

with z = logits (+ bias): an output layer's bias can be handed over separately
(``bias``), so that it is added inside the same pass, and its gradient, the sum of
d log p / dz over the rows, comes out of the backward pass.

TensorFlow's fused kernel (`tf.nn.sparse_softmax_cross_entropy_with_logits`) makes
several passes over the [N, V] logits on a CPU; the same two formulas compiled by XLA
fuse into one pass forward (max, sum of exponentials, the target's logit) and one
backward (the probabilities minus the one-hot, times the upstream gradient, written
once). The logits may be bfloat16 or float16 (a mixed-precision policy): they are read
in float32 inside the program, so the softmax and its log-sum-exp stay float32.

Measured (AMX CPU, N = 1,210 gathered positions of an APNEWS batch, V = 4,591, the
[N, 256] x [256, V] product included, forward and backward; `benchmarks.kernels`,
`benchmarks/results/medium/kernels_amx.json`): float32 40.2 ms with the fused kernel,
34.0 ms with this; bfloat16 products 21.3 ms and 16.6 ms.

The bias matters in bfloat16: oneDNN's product with the bias fused into it ran at 602
GFLOP/s against 1,356 for the product alone ([1,216, 256] x [256, 4,591], AMX host), and
TensorFlow's bias gradient (a column sum of the bfloat16 [N, V] gradient) took 2.9 ms of
a 61 ms step. With the bias added here instead, the sentence LSTM LM's bfloat16 training
step fell from 64.2 to 57.5 ms (AMX host, fastest of 4 interleaved rounds of 15 steps,
idle; a probe script, not committed); its float32 step did not gain (78.1 against
79.3 ms), so float32 keeps the fused product (`tfktopic.evaluation.perplexity.
gathered_token_nll` chooses).

XLA compiles one program per shape, and the number of gathered positions changes from
batch to batch: callers pad the gathered rows to a multiple of `ROW_BUCKET`
(`tfktopic.evaluation.perplexity.gather_real_positions`'s ``bucket``), so a run compiles
at most one forward and one backward program per bucket (30 buckets for batches of
64 x 30 positions; about 0.4 s each, measured on a loaded machine), not one per batch.

``TFKTOPIC_XLA_LOOPS=0`` (`tfktopic.xla.xla_loops`) runs TensorFlow's fused kernel instead:
the same values up to float rounding (tested).

Example:
>>> log_p = target_log_softmax([1], [[0.0, 0.0]])
>>> round(float(log_p[0]), 4)
-0.6931
"""

from keras import ops

from tfktopic import backend
from tfktopic.xla import xla_loops

if backend.is_tensorflow():
    import tensorflow as tf

__all__ = ["ROW_BUCKET", "row_bucket", "target_log_softmax", "reference_target_log_softmax"]

#: Gathered softmax rows are padded up to a multiple of this when the cross-entropy runs
#: as an XLA program (one compiled program per bucket instead of one per row count).
ROW_BUCKET = 64


def row_bucket():
    """The row multiple that gathered softmax inputs should be padded to: `ROW_BUCKET`
    when the cross-entropy is XLA-compiled (`xla_loops`), else 1 (no padding)."""
    return ROW_BUCKET if backend.is_tensorflow() and xla_loops() else 1


def reference_target_log_softmax(targets, logits, bias=None):
    """The `keras.ops` reference of `target_log_softmax` (every backend): z_y - logsumexp(z)
    with z = logits (+ bias) in float32; the backend differentiates it."""
    scores = ops.cast(logits, "float32")
    if bias is not None:
        scores = scores + ops.cast(bias, "float32")
    targets = ops.cast(targets, "int32")
    chosen = ops.squeeze(ops.take_along_axis(scores, ops.expand_dims(targets, -1), axis=-1), -1)
    return chosen - ops.logsumexp(scores, axis=-1)


if backend.is_tensorflow():  # the fused kernels below are TensorFlow's
    def _scores(logits, bias):
        """z = logits (+ bias), float32 [N, V]."""
        logits = tf.cast(logits, tf.float32)
        return logits if bias is None else logits + bias


    @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
    def _forward(logits, targets, bias=None):
        """(log p(target) [N], logsumexp [N]) of float logits [N, V] (plus a float32 bias [V]);
        float32."""
        logits = _scores(logits, bias)
        peak = tf.reduce_max(logits, axis=-1)
        log_norm = tf.math.log(tf.reduce_sum(tf.exp(logits - peak[:, None]), axis=-1)) + peak
        return tf.gather(logits, targets, batch_dims=1) - log_norm, log_norm


    @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
    def _backward(logits, targets, log_norm, upstream, bias=None):
        """dz = upstream[:, None] * (onehot(target) - softmax(z)) in the logits' dtype, and
        with a bias also its float32 gradient, the sum of dz over the rows."""
        probabilities = tf.exp(_scores(logits, bias) - log_norm[:, None])
        onehot = tf.one_hot(targets, tf.shape(logits)[-1], dtype=tf.float32)
        d_scores = (onehot - probabilities) * upstream[:, None]
        if bias is None:
            return tf.cast(d_scores, logits.dtype)
        return tf.cast(d_scores, logits.dtype), tf.reduce_sum(d_scores, axis=0)


    @tf.custom_gradient
    def _xla_target_log_softmax(logits, targets):
        log_prob, log_norm = _forward(logits, targets)

        def grad(upstream):
            return _backward(logits, targets, log_norm, tf.cast(upstream, tf.float32)), None

        return log_prob, grad


    @tf.custom_gradient
    def _xla_biased_target_log_softmax(logits, bias, targets):
        log_prob, log_norm = _forward(logits, targets, bias)

        def grad(upstream):
            d_logits, d_bias = _backward(logits, targets, log_norm, tf.cast(upstream, tf.float32),
                                         bias)
            return d_logits, d_bias, None

        return log_prob, grad


def target_log_softmax(targets, logits, bias=None):
    """log softmax(logits + bias)[..., target] of every position, in float32.

    Args:
        targets: int [...] target ids.
        logits: float [..., V] unnormalised scores (float32, bfloat16 or float16).
        bias: optional float [V] added to every row of `logits` in float32 (e.g. the bias
            of the output layer that made them); its gradient is float32.

    Returns:
        float32 [...]: z_y - logsumexp(z); its gradient reaches `logits` (in their dtype)
        and `bias`.
    """
    if not backend.is_tensorflow():
        return reference_target_log_softmax(targets, logits, bias)
    logits = tf.convert_to_tensor(logits)
    targets = tf.cast(targets, tf.int32)
    if bias is not None:
        bias = tf.cast(tf.convert_to_tensor(bias), tf.float32)
    if not xla_loops():
        return -tf.nn.sparse_softmax_cross_entropy_with_logits(targets, _scores(logits, bias))
    leading = tf.shape(targets)
    flat_logits = tf.reshape(logits, [-1, tf.shape(logits)[-1]])
    flat_targets = tf.reshape(targets, [-1])
    if bias is None:
        flat = _xla_target_log_softmax(flat_logits, flat_targets)
    else:
        flat = _xla_biased_target_log_softmax(flat_logits, bias, flat_targets)
    result = tf.reshape(flat, leading)
    result.set_shape(targets.shape)
    return result
