"""Sentence windows, leak-free contexts, document sequences and LM streams."""

import random

import numpy as np
import pytest

from tfktopic.data import (TopicVocabulary, Vocabulary, document_sequences, read_ptb, read_tdlm,
                           sentence_examples, sentence_windows, stream_arrays)


@pytest.mark.parametrize("n", [0, 1, 29, 30, 31, 59, 60, 61, 95])
def test_windows_cover_every_target_once(n):
    ids = list(range(10, 10 + n))
    windows = sentence_windows(ids, bos_id=1, eos_id=2, max_len=30)
    assert all(2 <= len(w) <= 31 for w in windows)
    assert [t for w in windows for t in w[1:]] == ids + [2]
    assert windows[0][0] == 1
    for a, b in zip(windows, windows[1:]):
        assert a[-1] == b[0]  # one token of overlap gives the next window its first input


def _unique_token_corpus(seed, num_docs=20):
    """Documents whose every token is unique: 'd3s2w7' = doc 3, sentence 2, word 7."""
    rng = random.Random(seed)
    docs = []
    for d in range(num_docs):
        docs.append([[f"d{d}s{s}w{w}" for w in range(rng.choice([1, 3, 12, 29, 30, 31, 64]))]
                     for s in range(rng.randint(1, 9))])
    return docs


def _sentence_of(word):
    return int(word.split("s")[1].split("w")[0])


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("truncate", ["first", "last"])
def test_preceding_context_never_sees_current_or_later_sentences(seed, truncate):
    docs = _unique_token_corpus(seed)
    lm = Vocabulary.build(docs, min_count=1)
    topic = TopicVocabulary.build(docs, lm, stopwords="none", max_freq_fraction=0.0)
    examples = sentence_examples(docs, lm, topic, max_len=30, context_len=40,
                                 protocol="preceding", truncate=truncate)
    for i in range(len(examples)):
        d, s = int(examples.document_index[i]), int(examples.sentence_index[i])
        context = [topic.words[t] for t in examples.context(i)]
        assert all(_sentence_of(w) < s for w in context), (d, s, context)
        earlier = [w for sentence in docs[d][:s] for w in sentence]
        assert context == (earlier[:40] if truncate == "first" else earlier[-40:])
        predicted = lm.decode(examples.targets[i][:examples.lengths[i]])
        assert not set(predicted) & set(context)


def test_all_other_context_is_every_other_window():
    docs = _unique_token_corpus(7)
    lm = Vocabulary.build(docs, min_count=1)
    topic = TopicVocabulary.build(docs, lm, stopwords="none", max_freq_fraction=0.0)
    examples = sentence_examples(docs, lm, topic, context_len=10_000, protocol="all_other")
    for i in range(len(examples)):
        d = int(examples.document_index[i])
        own = set(lm.decode(examples.targets[i][:examples.lengths[i]]))
        context = [topic.words[t] for t in examples.context(i)]
        everything = [w for sentence in docs[d] for w in sentence]
        assert context == [w for w in everything if w not in own]


def _reference_contexts(sentence_of, owned, protocol, context_len, truncate):
    """The definition, written the obvious (quadratic) way."""
    contexts = []
    for w in range(len(owned)):
        if protocol == "all_other":
            ids = [t for v, o in enumerate(owned) if v != w for t in o]
        else:
            ids = [t for v, o in enumerate(owned) if sentence_of[v] < sentence_of[w] for t in o]
        if context_len is not None:
            ids = ids[:context_len] if truncate == "first" or context_len == 0 else \
                ids[len(ids) - min(len(ids), context_len):]
        contexts.append(ids)
    return contexts


@pytest.mark.parametrize("protocol", ["all_other", "preceding"])
@pytest.mark.parametrize("truncate", ["first", "last"])
@pytest.mark.parametrize("context_len", [0, 1, 7, 40, None])
def test_window_contexts_equal_their_definition(protocol, truncate, context_len):
    from tfktopic.data.contexts import _window_contexts

    rng = np.random.default_rng(len(protocol) + len(truncate) + (context_len or 99))
    for _ in range(5):
        sentence_of = np.sort(rng.integers(0, 6, size=int(rng.integers(1, 15))))
        owned = [rng.integers(0, 50, size=int(rng.integers(0, 9))).astype(np.int32)
                 for _ in sentence_of]
        got = _window_contexts(sentence_of, owned, protocol, context_len, truncate)
        want = _reference_contexts(sentence_of, owned, protocol, context_len, truncate)
        assert [c.tolist() for c in got] == want


def test_a_long_document_s_all_other_contexts_hold_only_their_kept_words():
    """One document of 3,000 windows: each all_other context is its own array of at most
    context_len ids, not a view of a per-window copy of the whole document (quadratic
    memory: a 20,000-sentence document took 18 GB before)."""
    from tfktopic.data.contexts import _window_contexts

    owned = [np.arange(i, i + 20, dtype=np.int32) for i in range(3000)]
    for truncate in ("first", "last"):
        contexts = _window_contexts(np.arange(3000), owned, "all_other", 300, truncate)
        assert all(c.base is None and c.size == 300 for c in contexts)


def test_the_none_protocol_empties_every_context_and_keeps_the_windows():
    docs = _unique_token_corpus(3)
    lm = Vocabulary.build(docs, min_count=1)
    topic = TopicVocabulary.build(docs, lm, stopwords="none", max_freq_fraction=0.0)
    empty = sentence_examples(docs, lm, topic, protocol="none")
    other = sentence_examples(docs, lm, topic, protocol="all_other")
    assert len(empty) == len(other) and (empty.context_splits == 0).all()
    assert np.array_equal(empty.tokens, other.tokens)
    assert np.array_equal(empty.targets, other.targets)
    assert sum(len(other.context(i)) for i in range(len(other))) > 0
    sequences = document_sequences(docs, lm, topic, sentences_per_chunk=4, protocol="none")
    M, J, _ = sequences.tokens.shape
    assert all(len(sequences.context(m, j)) == 0 for m in range(M) for j in range(J))
    with pytest.raises(ValueError, match="protocol must be one of"):
        sentence_examples(docs, lm, topic, protocol="future")


def test_preceding_contexts_on_real_apnews(apnews_path, mallet_stopwords_path):
    corpus = read_tdlm(apnews_path).subset(range(150))
    lm = Vocabulary.build(corpus, min_count=2)
    topic = TopicVocabulary.build(corpus, lm, stopwords=mallet_stopwords_path)
    examples = sentence_examples(corpus, lm, topic, protocol="preceding")
    assert examples.num_targets == sum(len(s) + 1 for s in corpus.sentences())
    for i in range(len(examples)):
        d, s = int(examples.document_index[i]), int(examples.sentence_index[i])
        # brute force, straight from the raw tokens
        earlier = [w for sentence in corpus[d][:s] for w in sentence]
        expected = [w for w in (w if w in lm else "<unk>" for w in earlier) if w in topic][:300]
        assert [topic.words[t] for t in examples.context(i)] == expected
        bow = examples.context_bow(i)
        assert bow.sum() == len(expected) and bow.shape == (len(topic),)
    first = examples.sentence_index == 0
    assert (np.diff(examples.context_splits)[first] == 0).all()


def test_document_sequences_pad_chunks_and_share_contexts(apnews_toy_path):
    corpus = read_tdlm(apnews_toy_path)
    lm = Vocabulary.build(corpus, min_count=2)
    topic = TopicVocabulary.build(corpus, lm, stopwords=["the", "a"])
    for protocol in ("preceding", "all_other"):
        sequences = document_sequences(corpus, lm, topic, sentences_per_chunk=4, protocol=protocol)
        examples = sentence_examples(corpus, lm, topic, protocol=protocol)
        M, J, T = sequences.tokens.shape
        assert (J, T) == (4, 30)
        real = sequences.lengths.reshape(-1) > 0
        assert real.sum() == len(examples)
        assert np.array_equal(sequences.tokens.reshape(-1, T)[real], examples.tokens)
        flat_contexts = [sequences.context(m, j) for m in range(M) for j in range(J)]
        kept = [c for c, r in zip(flat_contexts, real) if r]
        assert all(np.array_equal(a, examples.context(i)) for i, a in enumerate(kept))
        windows_per_doc = np.bincount(examples.document_index, minlength=len(corpus))
        assert M == sum(-(-n // J) for n in windows_per_doc)


def test_ptb_stream_is_one_continuous_sequence(ptb_dir):
    corpus = read_ptb(ptb_dir / "ptb.valid.txt")
    lm = Vocabulary.build(read_ptb(ptb_dir / "ptb.train.txt"), min_count=1)
    inputs, targets = stream_arrays(corpus, lm, batch_size=20, num_steps=35)
    total = 70_390 + 3_370  # tokens + one <eos> per sentence
    assert inputs.shape == (((total // 20) - 1) // 35, 20, 35)
    # targets are the inputs shifted by one, also across batch boundaries
    rows_in = inputs.transpose(1, 0, 2).reshape(20, -1)
    rows_tg = targets.transpose(1, 0, 2).reshape(20, -1)
    assert np.array_equal(rows_in[:, 1:], rows_tg[:, :-1])
    first_sentence = lm.encode(corpus[0][0]) + [lm.eos_id]
    assert rows_in[0, :len(first_sentence)].tolist() == first_sentence
    with pytest.raises(ValueError, match="too short"):
        stream_arrays([[["a", "b"]]], lm, batch_size=4, num_steps=5)


def test_bad_arguments():
    lm = Vocabulary.build([[["a"]]], min_count=1)
    with pytest.raises(ValueError, match="protocol must be one of"):
        sentence_examples([[["a"]]], lm, None, protocol="future")
    with pytest.raises(ValueError, match="max_len must be >= 1"):
        sentence_windows([5], 1, 2, max_len=0)
