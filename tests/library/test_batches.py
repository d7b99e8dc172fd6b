"""Numpy batches (`tfktopic.data.batches`, the runs' input outside TensorFlow): the same
dicts as the tf.data pipelines, seeded per-epoch shuffles, resumption, streams in order."""

import numpy as np
import pytest

from tfktopic.data import TopicVocabulary, Vocabulary, document_sequences, read_tdlm, sentence_examples
from tfktopic.data.batches import DocumentBatches, SentenceBatches, StreamBatches, bags_of_words
from tfktopic.data.pipeline import document_dataset, sentence_dataset
from tfktopic.data.streams import document_streams, num_batches, stream_batches


@pytest.fixture(scope="module")
def toy(apnews_toy_path):
    corpus = read_tdlm(apnews_toy_path)
    lm = Vocabulary.build(corpus, min_count=2)
    topic = TopicVocabulary.build(corpus, lm)
    return corpus, lm, topic


def _tf_batches(dataset):
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]


def _assert_same_batches(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert set(a) == set(b)
        for key in a:
            assert a[key].dtype == b[key].dtype, key
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_sentence_batches_equal_the_tf_data_pipeline_in_order(toy):
    corpus, lm, topic = toy
    examples = sentence_examples(corpus, lm, topic, protocol="all_other")
    ours = SentenceBatches(examples, 32, shuffle=False, document_targets=True)
    _assert_same_batches([ours[i] for i in range(len(ours))], _tf_batches(
        sentence_dataset(examples, 32, shuffle=False, document_targets=True)))


def test_document_batches_equal_the_tf_data_pipeline_in_order(toy):
    corpus, lm, topic = toy
    sequences = document_sequences(corpus, lm, topic, sentences_per_chunk=8,
                                   protocol="preceding")
    ours = DocumentBatches(sequences, 4, shuffle=False, drop_remainder=True)
    _assert_same_batches([ours[i] for i in range(len(ours))], _tf_batches(
        document_dataset(sequences, 4, shuffle=False, drop_remainder=True)))


def test_shuffled_epochs_cover_every_example_once_and_resume_from_their_seed(toy):
    corpus, lm, topic = toy
    examples = sentence_examples(corpus, lm, topic)

    def epoch(batches):
        tokens = np.concatenate([batches[i]["tokens"] for i in range(len(batches))])
        batches.on_epoch_end()
        return tokens

    run = SentenceBatches(examples, 64, seed=5)
    first, second = epoch(run), epoch(run)
    # Each epoch is a permutation of the examples, and a new one.
    key = lambda t: sorted(map(bytes, t))
    assert key(first) == key(second) == key(examples.tokens)
    assert not np.array_equal(first, second)
    # A run resumed at epoch 1 sees epoch 1's batches; another seed, other batches.
    resumed = SentenceBatches(examples, 64, seed=5)
    resumed.start_epoch(1)
    np.testing.assert_array_equal(epoch(resumed), second)
    assert not np.array_equal(epoch(SentenceBatches(examples, 64, seed=6)), first)


def test_bags_of_words_count_the_ragged_ids_of_the_rows_asked():
    values, splits = np.array([3, 1, 3, 0, 2, 2, 9]), np.array([0, 3, 3, 7])
    np.testing.assert_array_equal(
        bags_of_words(values, splits, [2, 1, 0], 4),
        [[1, 0, 2, 0], [0, 0, 0, 0], [0, 1, 0, 2]])  # id 9 >= width is dropped


def test_stream_batches_are_the_generators_and_an_evaluation_pass_restarts(toy):
    corpus, lm, topic = toy
    streams = document_streams(corpus, lm, topic)
    expected = list(stream_batches(streams, 4, 30, context="preceding"))
    batches = StreamBatches(lambda: stream_batches(streams, 4, 30, context="preceding"),
                            num_batches(streams, 4, 30), restart=True)
    assert len(batches) == len(expected)
    for _ in range(2):  # two passes: the second starts the generator again
        for i, want in enumerate(expected):
            got = batches[i]
            assert got["document"].dtype == np.int32
            for key in want:
                np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    with pytest.raises(IndexError, match="in order"):
        batches[2]
