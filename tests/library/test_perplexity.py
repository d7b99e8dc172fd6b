"""Masked perplexity: closed forms, streaming metric, evaluation loop."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfktopic.data import Vocabulary, read_ptb, sentence_examples
from tfktopic.data.pipeline import sentence_dataset
from tfktopic.evaluation import Perplexity, evaluate_perplexity, masked_token_nll


def _reference_nll(targets, logits, mask):
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    return -(picked * mask).sum(), mask.sum()


def test_masked_nll_matches_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 7, 11)).astype(np.float32)
    targets = rng.integers(0, 11, size=(3, 7))
    mask = (rng.random((3, 7)) > 0.3).astype(np.float32)
    nll, count = masked_token_nll(targets, logits, mask)
    ref_nll, ref_count = _reference_nll(targets, logits.astype(np.float64), mask)
    assert float(count) == ref_count
    assert float(nll) == pytest.approx(ref_nll, rel=1e-5)
    log_probs = tf.nn.log_softmax(logits).numpy()
    nll2, _ = masked_token_nll(targets, log_probs, mask, from_logits=False)
    assert float(nll2) == pytest.approx(ref_nll, rel=1e-5)


def test_uniform_model_has_perplexity_equal_to_vocabulary_size():
    metric = Perplexity()
    for batch in range(3):
        mask = np.ones((2, 5), np.float32)
        mask[:, batch + 2:] = 0
        metric.update_state(np.zeros((2, 5), np.int32), np.zeros((2, 5, 37), np.float32), mask)
    assert float(metric.result()) == pytest.approx(37.0, rel=1e-5)
    assert float(metric.num_tokens) == 2 * (2 + 3 + 4)
    metric.reset_state()
    assert float(metric.num_tokens) == 0
    assert Perplexity.from_config(metric.get_config()).from_logits


def test_streaming_metric_equals_global_sum():
    rng = np.random.default_rng(1)
    metric = Perplexity()
    total_nll, total_count = 0.0, 0.0
    for _ in range(4):
        logits = rng.normal(size=(2, 6, 9))
        targets = rng.integers(0, 9, size=(2, 6))
        mask = (rng.random((2, 6)) > 0.5).astype(np.float32)
        metric.update_state(targets, logits.astype(np.float32), mask)
        n, c = _reference_nll(targets, logits, mask)
        total_nll += n
        total_count += c
    assert float(metric.result()) == pytest.approx(math.exp(total_nll / total_count), rel=1e-5)


def test_unigram_model_on_ptb_valid(ptb_dir):
    """A unigram LM (train counts) scored through the pipeline equals a direct count."""
    train = read_ptb(ptb_dir / "ptb.train.txt")
    valid = read_ptb(ptb_dir / "ptb.valid.txt")
    vocab = Vocabulary.build(train, min_count=1)
    counts = np.array([vocab.counts.get(t, 0) for t in vocab.tokens], np.float64) + 1e-3
    counts[[vocab.pad_id, vocab.bos_id]] = 0
    with np.errstate(divide="ignore"):
        log_probs = np.log(counts / counts.sum())  # -inf for <pad>/<bos>, masked out
    table = tf.constant(log_probs, tf.float32)
    examples = sentence_examples(valid, vocab, None)
    dataset = sentence_dataset(examples, batch_size=256, shuffle=False)

    def predict(batch):
        return tf.broadcast_to(table, tf.concat([tf.shape(batch["tokens"]), [len(vocab)]], 0))

    result = evaluate_perplexity(predict, dataset, from_logits=False, protocol="sentence")
    targets = [vocab.token_to_id(t) for s in valid.sentences() for t in s + ["<eos>"]]
    direct = math.exp(-np.mean(log_probs[targets]))
    assert result.num_tokens == 70_390 + 3_370
    assert result.perplexity == pytest.approx(direct, rel=1e-4)
    assert 500 < result.perplexity < 1000  # a unigram model of PTB
    assert result.as_dict()["protocol"] == "sentence"


def test_evaluate_perplexity_calls_keras_models_in_inference_mode():
    class Probe(keras.Model):
        def call(self, batch, training=False):
            assert training is False
            shape = keras.ops.shape(batch["tokens"])
            return keras.ops.zeros((shape[0], shape[1], 5))

    batch = {"tokens": np.zeros((2, 3), np.int32), "targets": np.ones((2, 3), np.int32),
             "mask": np.array([[1, 1, 0], [1, 0, 0]], np.float32)}
    result = evaluate_perplexity(Probe(), [batch])
    assert result.num_tokens == 3 and result.perplexity == pytest.approx(5.0, rel=1e-5)


def test_unigram_perplexity_is_the_add_half_closed_form():
    import types

    from tfktopic.evaluation import unigram_perplexity

    # "b" has no count at all (a type the training text never had): add-1/2 mass only.
    vocab = Vocabulary(["<pad>", "<bos>", "<eos>", "<unk>", "a", "b"],
                       {"<eos>": 2, "<unk>": 1, "a": 3})
    # Two windows; targets beyond `lengths` (the padding) are ignored.
    examples = types.SimpleNamespace(
        tokens=np.zeros((2, 3), np.int32), lengths=np.array([3, 1]),
        targets=np.array([[4, 5, 2], [3, 0, 0]]))
    p = np.array([0, 0, 2.5, 1.5, 3.5, 0.5]) / 8.0          # <pad>, <bos> get no mass
    expected = math.exp(-np.mean(np.log(p[[4, 5, 2, 3]])))
    assert unigram_perplexity(vocab, examples) == pytest.approx(expected, rel=1e-12)
    empty = types.SimpleNamespace(tokens=examples.tokens, lengths=np.array([0, 0]),
                                  targets=examples.targets)
    assert math.isnan(unigram_perplexity(vocab, empty))


# ------------------------------------------------------- the helpers the objectives share
def test_log_probabilities_normalise_the_last_axis_only():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(2, 3, 5)).astype(np.float32)   # three axes: each one differs
    from tfktopic.evaluation.perplexity import log_probabilities

    expected = logits - np.log(np.exp(logits.astype(np.float64)).sum(-1, keepdims=True))
    np.testing.assert_allclose(log_probabilities(logits).numpy(), expected, atol=1e-6)
    np.testing.assert_array_equal(log_probabilities(logits, from_logits=False).numpy(), logits)


def test_gather_real_positions_takes_the_weighted_positions_in_row_major_order():
    """Rank-3 mask with weights 1 and 0.5: every position with weight > 0, its target,
    weight, per-position features, and its window's per-row entry (numpy's argwhere)."""
    from tfktopic.evaluation.perplexity import gather_real_positions

    rng = np.random.default_rng(3)
    mask = rng.choice([0.0, 0.5, 1.0], size=(2, 3, 4)).astype(np.float32)
    targets = rng.integers(0, 9, size=(2, 3, 4))
    features = rng.normal(size=(2, 3, 4, 6)).astype(np.float32)
    topics = rng.normal(size=(2, 3, 7)).astype(np.float32)
    real = gather_real_positions(mask, targets, per_position=(features,), per_row=(topics,))
    index = np.argwhere(mask > 0)
    np.testing.assert_array_equal(real.index.numpy(), index)
    np.testing.assert_array_equal(real.targets.numpy(), targets[mask > 0])
    np.testing.assert_array_equal(real.mask.numpy(), mask[mask > 0])
    np.testing.assert_array_equal(real.per_position[0].numpy(), features[mask > 0])
    np.testing.assert_array_equal(real.per_row[0].numpy(), topics[index[:, 0], index[:, 1]])


def test_gathered_token_nll_equals_the_nll_of_the_head_at_every_position():
    from tfktopic.evaluation.perplexity import gathered_token_nll

    rng = np.random.default_rng(4)
    features = rng.normal(size=(3, 5, 6)).astype(np.float32)
    targets = rng.integers(0, 11, size=(3, 5))
    mask = (rng.random((3, 5)) > 0.4).astype(np.float32)
    head = keras.layers.Dense(11)
    full_nll, full_count = masked_token_nll(targets, head(features), mask)
    nll, count = gathered_token_nll(head, features, targets, mask)
    ref_nll, ref_count = _reference_nll(targets, head(features).numpy().astype(np.float64), mask)
    assert float(count) == float(full_count) == ref_count
    assert float(nll) == pytest.approx(ref_nll, rel=1e-5)
    assert float(full_nll) == pytest.approx(ref_nll, rel=1e-5)


@pytest.mark.parametrize("from_logits", [True, False])
def test_evaluate_perplexity_sums_each_row_into_its_document(from_logits):
    """Per-document sums from row ids given with the dataset, batches of 3 rows x 5 steps
    (rows != steps, so a sum over the wrong axis is seen), against numpy."""
    rng = np.random.default_rng(5)
    batches, expected_nll, expected_tokens = [], np.zeros(3), np.zeros(3)
    row_documents = [0, 2, 0, 1, 1, 2]
    for b in range(2):
        logits = rng.normal(size=(3, 5, 7)).astype(np.float32)
        if not from_logits:
            logits = tf.nn.log_softmax(logits).numpy()
        targets = rng.integers(0, 7, size=(3, 5))
        mask = (rng.random((3, 5)) > 0.3).astype(np.float32)
        batches.append({"logits": logits, "targets": targets, "mask": mask})
        for row in range(3):
            nll, count = _reference_nll(targets[row:row + 1], logits[row:row + 1].astype(
                np.float64), mask[row:row + 1])
            expected_nll[row_documents[3 * b + row]] += nll
            expected_tokens[row_documents[3 * b + row]] += count
    result = evaluate_perplexity(lambda batch: batch["logits"], batches, from_logits=from_logits,
                                 documents=(3, row_documents))
    np.testing.assert_allclose(result.document_nll, expected_nll, rtol=1e-5)
    np.testing.assert_array_equal(result.document_tokens, expected_tokens)
    assert result.nll == pytest.approx(expected_nll.sum() / expected_tokens.sum(), rel=1e-6)
