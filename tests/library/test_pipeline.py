"""tf.data pipelines: the model-contract dicts, determinism, bag-of-words."""

import numpy as np
import pytest

from tfktopic.data import TopicVocabulary, Vocabulary, document_sequences, read_tdlm, sentence_examples
from tfktopic.data.pipeline import document_dataset, sentence_dataset, stream_dataset


@pytest.fixture(scope="module")
def toy(apnews_toy_path):
    corpus = read_tdlm(apnews_toy_path)
    lm = Vocabulary.build(corpus, min_count=2)
    topic = TopicVocabulary.build(corpus, lm)
    return corpus, lm, topic


def _batches(dataset):
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]


def test_sentence_batches_follow_the_contract(toy):
    corpus, lm, topic = toy
    examples = sentence_examples(corpus, lm, topic, protocol="all_other")
    batches = _batches(sentence_dataset(examples, batch_size=32, shuffle=False))
    assert len(batches) == -(-len(examples) // 32)
    first = batches[0]
    assert set(first) == {"tokens", "targets", "mask", "context_bow"}
    assert first["tokens"].dtype == np.int32 and first["mask"].dtype == np.float32
    assert first["context_bow"].shape == (32, len(topic)) and first["context_bow"].dtype == np.float32
    assert first["tokens"].shape == (32, 30)
    tokens = np.concatenate([b["tokens"] for b in batches])
    bows = np.concatenate([b["context_bow"] for b in batches])
    masks = np.concatenate([b["mask"] for b in batches])
    assert np.array_equal(tokens, examples.tokens)
    assert np.array_equal(masks, examples.mask)
    for i in range(0, len(examples), 37):
        assert np.array_equal(bows[i], examples.context_bow(i))
    assert masks.sum() == examples.num_targets
    spec = sentence_dataset(examples, batch_size=32).element_spec
    assert {k: v.shape.as_list() for k, v in spec.items()} == {
        "tokens": [None, 30], "targets": [None, 30], "mask": [None, 30],
        "context_bow": [None, len(topic)]}


def test_shuffling_is_deterministic_under_a_seed(toy):
    corpus, lm, topic = toy
    examples = sentence_examples(corpus, lm, topic)

    def two_epochs(seed):
        dataset = sentence_dataset(examples, batch_size=64, seed=seed)
        return [b["tokens"] for _ in range(2) for b in _batches(dataset)]

    a, b, c = two_epochs(5), two_epochs(5), two_epochs(6)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    half = len(a) // 2
    assert not np.array_equal(a[0], a[half])  # reshuffled each epoch
    dropped = _batches(sentence_dataset(examples, batch_size=64, drop_remainder=True))
    assert all(x["tokens"].shape[0] == 64 for x in dropped)


def test_document_batches(toy):
    corpus, lm, topic = toy
    sequences = document_sequences(corpus, lm, topic, sentences_per_chunk=8, protocol="preceding")
    batches = _batches(document_dataset(sequences, batch_size=4, shuffle=False))
    first = batches[0]
    assert first["tokens"].shape == (4, 8, 30) and first["context_bow"].shape == (4, 8, len(topic))
    for m in range(4):
        for j in range(8):
            expected = np.bincount(sequences.context(m, j), minlength=len(topic))
            assert np.array_equal(first["context_bow"][m, j], expected)
    assert np.array_equal(first["mask"].sum(-1), sequences.lengths[:4])
    spec = document_dataset(sequences, batch_size=4).element_spec
    assert spec["context_bow"].shape.as_list() == [None, 8, len(topic)]
    assert spec["tokens"].shape.as_list() == [None, 8, 30]


def test_stream_dataset_shapes():
    inputs = np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4)
    batches = _batches(stream_dataset(inputs, inputs + 1))
    assert len(batches) == 2 and batches[1]["tokens"].shape == (3, 4)
    assert batches[0]["mask"].sum() == 12
    with pytest.raises(ValueError, match="num_batches, B, T"):
        stream_dataset(inputs[0], inputs[0])


def test_every_pipeline_of_the_package_prefetches_without_autotuning():
    """tf.data's autotuning thread stalls an iterator's teardown (`prefetched`): every
    pipeline the package builds turns it off, and their batches are unchanged by it."""
    from tfktopic.bayes.setups import window_dataset
    from tfktopic.data import load_corpus
    from tfktopic.data.streams import document_stream_dataset, document_streams
    from tfktopic.runs.checkpoints import epoch_data

    corpus = load_corpus("lee")     # ships with gensim: runs without ../shared/data
    lm = Vocabulary.build(corpus, min_count=3)
    topic = TopicVocabulary.build(corpus, lm)
    examples = sentence_examples(corpus, lm, topic)
    sequences = document_sequences(corpus, lm, topic, sentences_per_chunk=8)
    streams = document_streams(corpus, lm)
    windows = np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4)
    sentences = sentence_dataset(examples, batch_size=16, seed=2)
    pipelines = {
        "sentence_dataset": sentences,
        "document_dataset": document_dataset(sequences, batch_size=4),
        "stream_dataset": stream_dataset(windows, windows + 1),
        "document_stream_dataset (training)": document_stream_dataset(streams, 4, shuffle=True),
        "document_stream_dataset (evaluation)": document_stream_dataset(streams, 4),
        "epoch_data": epoch_data(sentences, 1)[0],
        "window_dataset": window_dataset(windows, windows + 1, batch_size=2),
    }
    tuned = [name for name, dataset in pipelines.items()
             if dataset.options().autotune.enabled is not False]
    assert tuned == []
    # The same batches as with autotuning on (same order, same contents; a fresh pipeline
    # each, since every new iterator of one shuffled pipeline is the next epoch's order).
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = True
    ours = _batches(sentence_dataset(examples, batch_size=16, seed=2).take(3))
    autotuned = _batches(sentence_dataset(examples, batch_size=16, seed=2)
                         .with_options(options).take(3))
    assert len(ours) == len(autotuned) == 3
    for a, b in zip(ours, autotuned):
        assert all(np.array_equal(a[k], b[k]) for k in a)
