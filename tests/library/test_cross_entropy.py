"""The XLA softmax cross-entropy (`tfktopic.evaluation.cross_entropy`) against numpy's
closed forms, and the row buckets that keep its compiled programs few."""

import numpy as np
import pytest
import tensorflow as tf

from conftest import assert_objective_unchanged_by_xla_loops
from tfktopic.evaluation.cross_entropy import ROW_BUCKET, row_bucket, target_log_softmax
from tfktopic.evaluation.perplexity import gather_real_positions, gathered_token_nll


def _numpy_log_softmax(logits):
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def _values_and_gradient(targets, logits, upstream):
    logits = tf.convert_to_tensor(logits)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        log_p = target_log_softmax(targets, logits)
        total = tf.reduce_sum(log_p * upstream)
    return log_p, tape.gradient(total, logits)


@pytest.mark.parametrize("xla", ["1", "0"])
def test_target_log_softmax_is_the_closed_form_and_its_gradient(xla, monkeypatch):
    """log p(y) = z_y - logsumexp(z) and d/dz = upstream (onehot(y) - softmax(z)), for rank-3
    targets, a logit of 100 (exp overflows float32 above 88.7), with XLA and with the fused kernel."""
    monkeypatch.setenv("TFKTOPIC_XLA_LOOPS", xla)
    rng = np.random.default_rng(0)
    logits = (rng.normal(size=(2, 3, 4, 13)) * 20).astype(np.float32)
    logits[0, 0, 0, 5] = 100.0
    targets = rng.integers(0, 13, size=(2, 3, 4))
    upstream = rng.normal(size=(2, 3, 4)).astype(np.float32)
    log_p, grad = _values_and_gradient(targets, logits, upstream)
    reference = _numpy_log_softmax(logits)
    assert log_p.dtype == tf.float32 and log_p.shape == (2, 3, 4)
    np.testing.assert_allclose(log_p.numpy(),
                               np.take_along_axis(reference, targets[..., None], -1)[..., 0],
                               rtol=1e-5, atol=1e-4)
    onehot = np.eye(13)[targets]
    np.testing.assert_allclose(grad.numpy(), upstream[..., None] * (onehot - np.exp(reference)),
                               atol=1e-5)


def test_half_precision_logits_are_read_in_float32_and_get_a_gradient_of_their_dtype(
        xla_loops_on):
    rng = np.random.default_rng(1)
    logits = tf.cast(rng.normal(size=(9, 40)) * 8, tf.bfloat16)
    targets = rng.integers(0, 40, size=9)
    log_p, grad = _values_and_gradient(targets, logits, tf.ones(9))
    exact = _numpy_log_softmax(tf.cast(logits, tf.float32).numpy())
    assert log_p.dtype == tf.float32 and grad.dtype == tf.bfloat16
    # The log-sum-exp is float32: only the bfloat16 logits themselves are rounded.
    np.testing.assert_allclose(log_p.numpy(), exact[np.arange(9), targets], atol=1e-5)
    np.testing.assert_allclose(tf.cast(grad, tf.float32).numpy(),
                               np.eye(40)[targets] - np.exp(exact), atol=1e-2)


@pytest.mark.parametrize("xla", ["1", "0"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_bias_given_apart_is_added_in_float32_and_gets_the_summed_row_gradient(xla, dtype,
                                                                                monkeypatch):
    """log p(y) = z_y - logsumexp(z) with z = logits + bias, d/dlogits = upstream (onehot(y) -
    softmax(z)) in the logits' dtype and d/dbias its sum over the rows, in float32."""
    monkeypatch.setenv("TFKTOPIC_XLA_LOOPS", xla)
    rng = np.random.default_rng(3)
    logits = tf.cast(rng.normal(size=(2, 5, 17)) * 6, dtype)
    bias = tf.constant(rng.normal(size=17) * 3, tf.float32)
    targets = rng.integers(0, 17, size=(2, 5))
    upstream = rng.normal(size=(2, 5)).astype(np.float32)
    with tf.GradientTape() as tape:
        tape.watch([logits, bias])
        log_p = target_log_softmax(targets, logits, bias=bias)
        total = tf.reduce_sum(log_p * upstream)
    d_logits, d_bias = tape.gradient(total, [logits, bias])
    scores = tf.cast(logits, tf.float32).numpy().astype(np.float64) + bias.numpy()
    reference = _numpy_log_softmax(scores)
    np.testing.assert_allclose(log_p.numpy(),
                               np.take_along_axis(reference, targets[..., None], -1)[..., 0],
                               rtol=1e-5, atol=1e-4)
    d_scores = upstream[..., None] * (np.eye(17)[targets] - np.exp(reference))
    assert d_logits.dtype == dtype and d_bias.dtype == tf.float32
    np.testing.assert_allclose(tf.cast(d_logits, tf.float32).numpy(), d_scores,
                               atol=1e-5 if dtype == "float32" else 2e-2)
    np.testing.assert_allclose(d_bias.numpy(), d_scores.sum(axis=(0, 1)), atol=1e-5)


def test_a_dense_head_in_16_bits_hands_its_bias_to_the_cross_entropy(xla_loops_on,
                                                                     monkeypatch):
    """bfloat16 features and a plain Dense head: the head is not called (its bias goes into
    the XLA program), and the NLL and the gradients of features, kernel and bias are the
    float64 closed form's; float32 features still call the head."""
    import keras

    rng = np.random.default_rng(6)
    features = tf.cast(rng.normal(size=(3, 6, 8)), tf.bfloat16)
    targets = rng.integers(0, 13, size=(3, 6))
    mask = (rng.random((3, 6)) > 0.3).astype(np.float32)
    head = keras.layers.Dense(13, bias_initializer=keras.initializers.RandomNormal(seed=1))
    head.build((None, 8))

    def forbidden(self, *args, **kwargs):
        raise AssertionError("the head was called")

    monkeypatch.setattr(keras.layers.Dense, "call", forbidden)
    with tf.GradientTape() as tape:
        tape.watch(features)
        nll, count = gathered_token_nll(head, features, targets, mask)
    d_features, d_kernel, d_bias = tape.gradient(nll, [features, head.kernel, head.bias])
    with pytest.raises(AssertionError, match="the head was called"):
        gathered_token_nll(head, tf.cast(features, tf.float32), targets, mask)

    x = tf.cast(features, tf.float32).numpy().astype(np.float64)
    kernel16 = tf.cast(tf.cast(head.kernel, tf.bfloat16), tf.float32).numpy()
    # The products are bfloat16 (the policy's compute dtype); the bias joins them in float32.
    products = tf.matmul(features, tf.cast(head.kernel, tf.bfloat16))
    scores = tf.cast(products, tf.float32).numpy().astype(np.float64) + head.bias.numpy()
    log_softmax = _numpy_log_softmax(scores)
    expected = -(np.take_along_axis(log_softmax, targets[..., None], -1)[..., 0] * mask).sum()
    assert float(count) == mask.sum()
    assert float(nll) == pytest.approx(expected, rel=1e-5)
    d_scores = -mask[..., None] * (np.eye(13)[targets] - np.exp(log_softmax))
    np.testing.assert_allclose(d_bias.numpy(), d_scores.sum(axis=(0, 1)), atol=1e-5)
    # bfloat16 gradient products: 8 significant bits, so the error is relative (one ulp at
    # 4.6 is 0.031, and CI's kernels summed one such product a rounding further: 0.0308).
    np.testing.assert_allclose(d_kernel.numpy(), np.einsum("btx,btv->xv", x, d_scores),
                               rtol=2 ** -6, atol=0.01)
    np.testing.assert_allclose(tf.cast(d_features, tf.float32).numpy(), d_scores @ kernel16.T,
                               atol=0.01)


def test_no_rows_gives_an_empty_result(xla_loops_on):
    log_p, grad = _values_and_gradient(np.zeros((0,), np.int32), tf.zeros((0, 7)), tf.ones(0))
    assert log_p.shape == (0,) and grad.shape == (0, 7)


def test_row_bucket_follows_the_xla_switch(monkeypatch):
    monkeypatch.setenv("TFKTOPIC_XLA_LOOPS", "1")
    assert row_bucket() == ROW_BUCKET > 1
    monkeypatch.setenv("TFKTOPIC_XLA_LOOPS", "0")
    assert row_bucket() == 1


@pytest.mark.parametrize("count, bucket", [(0, 8), (1, 8), (8, 8), (9, 8), (3, 2)])
def test_bucketed_positions_pad_with_zero_rows_that_add_nothing(count, bucket):
    rng = np.random.default_rng(count)
    mask = np.zeros((3, 5), np.float32)
    mask.flat[rng.choice(15, size=count, replace=False)] = rng.choice([0.5, 1.0], size=count)
    targets = rng.integers(1, 9, size=(3, 5))
    features = rng.normal(size=(3, 5, 4)).astype(np.float32)
    topics = rng.normal(size=(3, 2)).astype(np.float32)
    plain = gather_real_positions(mask, targets, per_position=(features,), per_row=(topics,))
    padded = gather_real_positions(mask, targets, per_position=(features,), per_row=(topics,),
                                   bucket=bucket)
    rows = -(-count // bucket) * bucket
    for field in ("index", "targets", "mask"):
        value = getattr(padded, field).numpy()
        assert value.shape[0] == rows
        np.testing.assert_array_equal(value[:count], getattr(plain, field).numpy())
        assert not np.any(value[count:])
    for a, b in zip(padded.per_position + padded.per_row, plain.per_position + plain.per_row):
        assert a.shape[0] == rows
        np.testing.assert_array_equal(a.numpy()[:count], b.numpy())
        assert not np.any(a.numpy()[count:])


def test_gathered_nll_with_xla_and_buckets_equals_the_plain_graph(monkeypatch):
    """The objective and its gradients are the same with the XLA cross-entropy on padded
    rows as with TensorFlow's kernel on the exact rows; the head sees a multiple of the
    bucket."""
    import keras

    rng = np.random.default_rng(5)
    features = tf.constant(rng.normal(size=(4, 7, 6)).astype(np.float32))
    targets = rng.integers(0, 11, size=(4, 7))
    mask = (rng.random((4, 7)) > 0.3).astype(np.float32)
    head = keras.layers.Dense(11)
    head.build((None, 6))
    seen, results = [], {}
    for xla in ("0", "1"):
        monkeypatch.setenv("TFKTOPIC_XLA_LOOPS", xla)

        def recording_head(x):
            seen.append((xla, int(x.shape[0])))
            return head(x)

        with tf.GradientTape() as tape:
            tape.watch(features)
            nll, count = gathered_token_nll(recording_head, features, targets, mask)
        results[xla] = (nll, count, tape.gradient(nll, [features] + head.trainable_weights))
    real = int((mask > 0).sum())
    assert seen == [("0", real), ("1", -(-real // ROW_BUCKET) * ROW_BUCKET)]
    assert float(results["1"][1]) == float(results["0"][1]) == mask.sum()
    assert float(results["1"][0]) == pytest.approx(float(results["0"][0]), rel=1e-5)
    for a, b in zip(results["1"][2], results["0"][2]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def test_tcnlm_objective_is_the_same_with_the_xla_cross_entropy(monkeypatch):
    """TCNLM gathers its rows itself (padded to the bucket for its factorized head, whose
    output is logits): loss and gradients equal the plain graph's."""
    import keras

    from tfktopic.models import TCNLM

    keras.utils.set_random_seed(0)
    model = TCNLM(30, 12, num_topics=4, embedding_dim=16, hidden_dim=16, ntm_units=(16,),
                  seed=1, mixture="factorized")
    rng = np.random.default_rng(2)
    tokens = rng.integers(4, 30, size=(3, 7)).astype(np.int32)
    mask = np.ones((3, 7), np.float32)
    mask[0, 3:] = 0.0
    batch = {"tokens": tokens, "targets": np.roll(tokens, -1, axis=1), "mask": mask,
             "context_bow": rng.poisson(0.5, size=(3, 12)).astype(np.float32)}
    model(batch)
    assert_objective_unchanged_by_xla_loops(model, batch, monkeypatch,
                                            ("loss", "nll_sum", "num_tokens"))
