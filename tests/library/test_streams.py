"""Document streams: same targets as the sentence windows, schedules, orders, contexts."""

import numpy as np
import pytest

from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus
from tfktopic.data.streams import (
    document_stream_dataset,
    document_streams,
    evaluation_order,
    num_batches,
    stream_batches,
    steps_per_epoch,
    training_order,
)
from tfktopic.runs import make_examples
from tfktopic.runs.settings import DATA_DEFAULTS


@pytest.fixture(scope="module")
def lee():
    train, valid, test = load_corpus("lee").split((0.8, 0.1, 0.1), seed=0)
    lm = Vocabulary.build(train, min_count=3)
    topic = TopicVocabulary.build(train, lm)
    return train, test, lm, topic


def _targets_by_document(batches, num_documents):
    found = [[] for _ in range(num_documents)]
    for batch in batches:
        for b, d in enumerate(batch["document"]):
            if d >= 0:
                found[d].extend(batch["targets"][b][batch["mask"][b] > 0].tolist())
    return found


def test_streams_score_exactly_the_sentence_level_targets(lee):
    _, test, lm, topic = lee
    sentence = make_examples("lstm", test, lm, topic, dict(DATA_DEFAULTS))
    expected = [[] for _ in range(len(test))]
    for i in range(len(sentence)):  # windows are in document, sentence, window order
        expected[sentence.document_index[i]].extend(
            sentence.targets[i, :sentence.lengths[i]].tolist())
    streams = document_streams(test, lm)
    found = _targets_by_document(stream_batches(streams, batch_size=5, bptt=30), len(test))
    # The same targets, in the same order, document by document (so the same
    # multiset and count, every <eos> included); no <bos> or <pad> is a target.
    assert found == expected
    assert sum(map(len, found)) == sentence.num_targets == streams.num_targets
    for d, document in enumerate(test):
        assert found[d].count(lm.eos_id) == len(document)
    assert all(lm.bos_id not in f and lm.pad_id not in f for f in found)
    # What differs is the input of a sentence's first word: <eos> of the
    # previous sentence (state carried) instead of a fresh <bos>.
    first = streams.streams[0]
    assert first[0] == lm.bos_id and (first == lm.bos_id).sum() == 1


def test_windows_are_consecutive_and_reset_only_at_a_document_start(lee):
    _, test, lm, _ = lee
    streams = document_streams(test, lm)
    position = {}
    for batch in stream_batches(streams, batch_size=3, bptt=7):
        for b, d in enumerate(batch["document"]):
            if d < 0:
                assert batch["reset"][b] == 1 and batch["mask"][b].sum() == 0
                continue
            start = position.get(d, 0)
            assert batch["reset"][b] == (1.0 if start == 0 else 0.0)
            n = int(batch["mask"][b].sum())
            assert np.all(batch["mask"][b][:n] == 1)
            stream = streams.streams[d]
            np.testing.assert_array_equal(batch["tokens"][b, :n], stream[start:start + n])
            np.testing.assert_array_equal(batch["targets"][b, :n], stream[start + 1:start + n + 1])
            position[d] = start + n
    assert all(position[d] == len(streams.streams[d]) - 1 for d in range(len(test)))
    assert num_batches(streams, 3, 7) == sum(1 for _ in stream_batches(streams, 3, 7))


def test_a_slot_continues_one_document_until_it_ends(lee):
    _, test, lm, _ = lee
    streams = document_streams(test, lm)
    previous = None
    for batch in stream_batches(streams, batch_size=4, bptt=30):
        if previous is not None:
            for b in range(4):
                if batch["reset"][b] == 0:
                    assert batch["document"][b] == previous[b]
        previous = batch["document"]


def test_training_order_is_seeded_per_epoch_and_evaluation_order_is_fixed(lee):
    train, _, lm, _ = lee
    streams = document_streams(train, lm)
    np.testing.assert_array_equal(training_order(len(train), 0, 3), training_order(len(train), 0, 3))
    assert not np.array_equal(training_order(len(train), 0, 0), training_order(len(train), 0, 1))
    assert not np.array_equal(training_order(len(train), 0, 0), training_order(len(train), 1, 0))
    order = evaluation_order(streams)
    lengths = streams.document_targets()[order]
    assert np.all(np.diff(lengths) <= 0) and sorted(order.tolist()) == list(range(len(train)))


def test_training_dataset_is_deterministic_and_resumes_at_an_epoch(lee):
    train, _, lm, _ = lee
    streams = document_streams(train, lm)
    steps = steps_per_epoch(streams, 8, 30)
    assert steps == -(-streams.num_windows(30) // 8)
    take = lambda ds, n: [b for b in ds.take(n).as_numpy_iterator()]
    first = take(document_stream_dataset(streams, 8, shuffle=True, seed=3), steps + 2)
    again = take(document_stream_dataset(streams, 8, shuffle=True, seed=3), steps + 2)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a["tokens"], b["tokens"])
    other = take(document_stream_dataset(streams, 8, shuffle=True, seed=4), 1)[0]
    assert not np.array_equal(other["document"], first[0]["document"])
    # The first batch of epoch 0 starts the first 8 documents of perm(3, 0).
    np.testing.assert_array_equal(first[0]["document"], training_order(len(train), 3, 0)[:8])
    assert np.all(first[0]["reset"] == 1)
    resumed = take(document_stream_dataset(streams, 8, shuffle=True, seed=3, initial_epoch=1), 2)
    for a, b in zip(resumed, first[steps:]):
        np.testing.assert_array_equal(a["tokens"], b["tokens"])
        np.testing.assert_array_equal(a["reset"], b["reset"])
    # The endless stream never idles a slot.
    assert all(np.all(b["document"] >= 0) for b in first)


def test_evaluation_dataset_has_a_known_length_and_every_target_once(lee):
    _, test, lm, _ = lee
    streams = document_streams(test, lm)
    dataset = document_stream_dataset(streams, batch_size=6)
    batches = list(dataset.as_numpy_iterator())
    assert int(dataset.cardinality()) == len(batches) == num_batches(streams, 6)
    assert sum(b["mask"].sum() for b in batches) == streams.num_targets


def test_topic_contexts_preceding_all_other_and_whole_document(lee):
    _, test, lm, topic = lee
    streams = document_streams(test, lm, topic)
    doc_bows = [np.bincount(topic.topic_ids(s[1:]), minlength=len(topic)) for s in streams.streams]
    seen = {}
    batches = {c: list(stream_batches(streams, 4, 20, context=c))
               for c in ("preceding", "all_other", "whole_document")}
    for i, batch in enumerate(batches["preceding"]):
        for b, d in enumerate(batch["document"]):
            if d < 0:
                continue
            own = np.bincount(topic.topic_ids(batch["targets"][b][batch["mask"][b] > 0]),
                              minlength=len(topic))
            before = seen.get(d, np.zeros(len(topic)))
            # preceding: exactly the topic words of the earlier windows' targets
            np.testing.assert_array_equal(batch["context_bow"][b], before)
            np.testing.assert_array_equal(batches["all_other"][i]["context_bow"][b],
                                          doc_bows[d] - own)
            np.testing.assert_array_equal(batches["whole_document"][i]["context_bow"][b],
                                          doc_bows[d])
            seen[d] = before + own
    # none: the same windows with every context empty (the ablation of the topic context)
    empty = list(stream_batches(streams, 4, 20, context="none"))
    assert len(empty) == len(batches["preceding"])
    for plain, ablated in zip(batches["preceding"], empty):
        np.testing.assert_array_equal(plain["targets"], ablated["targets"])
        assert ablated["context_bow"].sum() == 0
    # context_len keeps the first topic words of the document
    capped = next(stream_batches(streams, 1, 10 ** 6, context="whole_document", context_len=5))
    assert capped["context_bow"].sum() == min(5, len(streams.topic_ids[capped["document"][0]]))


def test_bad_arguments_and_empty_documents(lee):
    _, test, lm, topic = lee
    streams = document_streams(test, lm)
    with pytest.raises(ValueError, match="batch_size"):
        next(stream_batches(streams, 0))
    with pytest.raises(ValueError, match="bptt"):
        document_stream_dataset(streams, 4, bptt=0)
    with pytest.raises(ValueError, match="context"):
        next(stream_batches(streams, 2, context="future"))
    with pytest.raises(ValueError, match="topic vocabulary"):
        next(stream_batches(streams, 2, context="preceding"))
    empty = document_streams([[], [["the"]], []], lm)
    assert empty.num_targets == 2
    batches = list(stream_batches(empty, 2, 30))
    assert len(batches) == 1 and batches[0]["document"].tolist() == [1, -1]
    with pytest.raises(ValueError, match="no target"):
        document_stream_dataset(document_streams([[]], lm), 2)
