"""log softmax(logits)[target]: the softmax cross-entropy of every training objective.

    log p(y) = z_y - logsumexp(z),    d log p(y) / dz = onehot(y) - softmax(z)

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

import tensorflow as tf

from tfktopic.xla import xla_loops

__all__ = ["ROW_BUCKET", "row_bucket", "target_log_softmax"]

#: Gathered softmax rows are padded up to a multiple of this when the cross-entropy runs
#: as an XLA program (one compiled program per bucket instead of one per row count).
ROW_BUCKET = 64


def row_bucket():
    """The row multiple that gathered softmax inputs should be padded to: `ROW_BUCKET`
    when the cross-entropy is XLA-compiled (`xla_loops`), else 1 (no padding)."""
    return ROW_BUCKET if xla_loops() else 1


@tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
def _forward(logits, targets):
    """(log p(target) [N], logsumexp [N]) of float logits [N, V]; float32."""
    logits = tf.cast(logits, tf.float32)
    peak = tf.reduce_max(logits, axis=-1)
    log_norm = tf.math.log(tf.reduce_sum(tf.exp(logits - peak[:, None]), axis=-1)) + peak
    return tf.gather(logits, targets, batch_dims=1) - log_norm, log_norm


@tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
def _backward(logits, targets, log_norm, upstream):
    """upstream[:, None] * (onehot(target) - softmax(logits)), in the logits' dtype."""
    probabilities = tf.exp(tf.cast(logits, tf.float32) - log_norm[:, None])
    onehot = tf.one_hot(targets, tf.shape(logits)[-1], dtype=tf.float32)
    return tf.cast((onehot - probabilities) * upstream[:, None], logits.dtype)


@tf.custom_gradient
def _xla_target_log_softmax(logits, targets):
    log_prob, log_norm = _forward(logits, targets)

    def grad(upstream):
        return _backward(logits, targets, log_norm, tf.cast(upstream, tf.float32)), None

    return log_prob, grad


def target_log_softmax(targets, logits):
    """log softmax(logits)[..., target] of every position, in float32.

    Args:
        targets: int [...] target ids.
        logits: float [..., V] unnormalised scores (float32, bfloat16 or float16).

    Returns:
        float32 [...]: z_y - logsumexp(z); its gradient reaches `logits` (in their dtype).
    """
    logits = tf.convert_to_tensor(logits)
    targets = tf.cast(targets, tf.int32)
    if not xla_loops():
        return -tf.nn.sparse_softmax_cross_entropy_with_logits(
            targets, tf.cast(logits, tf.float32))
    leading = tf.shape(targets)
    flat = _xla_target_log_softmax(tf.reshape(logits, [-1, tf.shape(logits)[-1]]),
                                   tf.reshape(targets, [-1]))
    result = tf.reshape(flat, leading)
    result.set_shape(targets.shape)
    return result
